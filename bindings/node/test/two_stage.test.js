// A two-stage model file ("stage2", version 2; core/src/knn/two_stage.rs) through the Node
// binding: Model, KnnDtw.load and classifyBatch answer with stage 2 — the nearest reference
// under the stage-2 normalisation among those on the side of BBR present that stage 1's
// nearest reference is on — checked against a brute force written here with dtwDistance.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const opsel = require('..')

const FIXTURES = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures')
const base = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'knn_golden.model.json'), 'utf8'))
const golden = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'knn_golden.json'), 'utf8'))

// The golden synthetic model (normalization none) made 1-NN and two-stage with z-score.
const oneStage = { ...base, k: 1 }
const twoStage = { ...oneStage, version: 2, stage2: { normalization: 'z-score', split: 'bbr-present' } }
// The golden queries, and the same windows rescaled and blended pairwise: raw levels (stage 1)
// then point elsewhere than shapes (stage 2, z-score), so the two stages disagree on some.
const windows = golden.queries.map((q) => q.window)
const queries = windows.concat(
  windows.map((w) => w.map((v) => 0.6 * v)),
  windows.map((w) => w.map((v) => 1.7 * v)),
  windows.map((w, i) => w.map((v, j) => 0.5 * (v + windows[(i + 1) % windows.length][j]))))

// Series::Normalization z-score, in the core's order of operations.
function zscore (w) {
  const n = w.length
  const mean = w.reduce((a, b) => a + b, 0) / n
  const sd = Math.sqrt(w.map((v) => (v - mean) * (v - mean)).reduce((a, b) => a + b, 0) / n)
  return Float64Array.from(w, (v) => (sd > 0 ? (v - mean) / sd : 0))
}

// 000 Table 6.1 labels: BBR present when a B<n> term has n > 0 (B1-C0, B1-C1, B1-B1).
function bbr (cls) {
  return /(^|-)B[1-9]/.test(cls)
}

function nearest (q, refs, keep) {
  let best = [Infinity, -1]
  refs.forEach((r, i) => {
    if (!keep(i)) return
    const d = opsel.dtwDistance(q, r, { radius: base.dtw.radius, cost: base.dtw.cost })
    if (d < best[0]) best = [d, i]
  })
  return best
}

function brute (q) {
  const raw = base.references.windows.map((w) => Float64Array.from(w))
  const labels = base.references.labels
  const side = (i) => bbr(base.classes[labels[i]])
  const s1 = nearest(Float64Array.from(q), raw, () => true)
  const z = raw.map(zscore)
  const s2 = nearest(zscore(q), z, (i) => side(i) === side(s1[1]))
  return { cls: base.classes[labels[s2[1]]], neighbor: s2[1], distance: s2[0], stage1: base.classes[labels[s1[1]]] }
}

test('a two-stage file classifies with stage 2', () => {
  const m = opsel.modelFromJson(JSON.stringify(twoStage))
  assert.deepEqual(m.stage2, { normalization: 'z-score', split: 'bbr-present' })
  const one = opsel.modelFromJson(JSON.stringify(oneStage))
  assert.equal(one.stage2, null)
  let differs = 0
  queries.forEach((q, id) => {
    const w = Float64Array.from(q)
    const b = brute(q)
    const p = m.classify(w)
    assert.equal(p.class, b.cls, `query ${id}`)
    assert.equal(p.neighbor, b.neighbor, `query ${id} neighbor`)
    assert.equal(p.distance, b.distance, `query ${id} distance`)
    // The same file read as one stage answers stage 1's class.
    assert.equal(one.classify(w).class, b.stage1, `query ${id} stage 1`)
    if (b.cls !== b.stage1) differs++
    const probs = m.classProbabilities(w)
    assert.equal(probs[p.classIndex], 1)
  })
  assert.ok(differs > 0, 'stage 2 changed some answers, so the test tells the two apart')
})

test('classifyBatch, KnnDtw.load and the file round trip keep both stages', async () => {
  const m = opsel.modelFromJson(JSON.stringify(twoStage))
  const flat = Float64Array.from(queries.flat())
  const want = queries.map((q) => brute(q).cls)
  assert.deepEqual((await m.classifyBatch(flat)).map((p) => p.class), want)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-two-stage-'))
  try {
    const file = path.join(dir, 'model.json')
    m.save(file)
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'))
    assert.equal(saved.version, 2)
    assert.deepEqual(saved.stage2, twoStage.stage2)
    assert.deepEqual(opsel.KnnDtw.load(file).predict(flat), want)
    assert.deepEqual(opsel.loadModel(file).classify(flat.subarray(0, base.window)).class, want[0])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('bad stage2 fields are refused with a coded error', () => {
  const bad = (f, re) => assert.throws(() => opsel.modelFromJson(JSON.stringify(f)),
    (e) => e.code === 'OPSEL_INVALID_MODEL' && re.test(e.message))
  bad({ ...twoStage, stage2: { normalization: 'log', split: 'bbr-present' } }, /log/)
  bad({ ...twoStage, stage2: { normalization: 'z-score', split: 'heterogeneous' } }, /heterogeneous/)
  bad({ ...twoStage, version: 1 }, /version 2/)
  bad({ ...twoStage, k: 3 }, /k = 3/)
})

// A version-3 file: stage 2 a 7-NN vote under the combined distance (z-sorted L1 and stage 1's
// DTW; core/src/knn/combined.rs). tests/fixtures/knn_two_stage_knn.json holds windows and the
// class a numpy implementation of the rule gave each (research/fixtures/make_two_stage_knn.py).
test('a version-3 two-stage file answers the fixture windows as numpy does', async () => {
  const m = opsel.loadModel(path.join(FIXTURES, 'knn_two_stage_knn.model.json'))
  const s2 = m.stage2
  assert.equal(s2.normalization, 'z-sorted')
  assert.equal(s2.k, 7)
  assert.equal(s2.stage1Weight, 0.25)
  assert.equal(s2.scales.length, 2)
  const cases = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'knn_two_stage_knn.json'), 'utf8')).cases
  cases.forEach((c, i) => {
    assert.equal(m.classify(Float64Array.from(c.window)).class, c.class, `case ${i}`)
  })
  const flat = Float64Array.from(cases.flatMap((c) => c.window))
  assert.deepEqual((await m.classifyBatch(flat)).map((p) => p.class), cases.map((c) => c.class))
})
