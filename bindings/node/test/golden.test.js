// The shared golden fixture (tests/fixtures/knn_golden.json) through the Node
// binding: identical predictions to the Rust core and the C ABI, distances to
// 1e-12 relative. Schema: tests/fixtures/README.md.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const opsel = require('..')

const FIXTURES = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures')
const golden = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'knn_golden.json'), 'utf8'))
const MODEL = path.join(FIXTURES, golden.model_file)
const TOL = golden.tolerance.distance_relative

function close (got, want, what) {
  assert.ok(Math.abs(got - want) <= TOL * Math.max(1, Math.abs(want)), `${what}: ${got} vs ${want}`)
}

function checkPrediction (p, q) {
  const id = `query ${q.id}`
  assert.equal(p.class, q.class, `${id} class`)
  assert.equal(p.classIndex, q.class_index, `${id} classIndex`)
  assert.equal(p.neighbor, q.neighbor, `${id} neighbor`)
  assert.equal(p.votes, q.votes, `${id} votes`)
  close(p.distance, q.distance, `${id} distance`)
  close(p.confidence, q.confidence, `${id} confidence`)
}

function flatQueries () {
  const w = golden.model.window
  const flat = new Float64Array(golden.queries.length * w)
  golden.queries.forEach((q, i) => flat.set(q.window, i * w))
  return flat
}

function tmpdir () {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-node-'))
}

test('loadModel exposes the fixture model', () => {
  const m = opsel.loadModel(MODEL)
  assert.equal(m.window, golden.model.window)
  assert.deepEqual(m.classes, golden.model.classes)
  assert.equal(m.referenceCount, golden.model.references)
  assert.deepEqual(m.config, { k: 3, radius: 10, cost: 'abs', normalization: 'none' })
  assert.equal(opsel.version(), '0.1.0')
})

test('Model.classify reproduces every golden prediction', () => {
  const m = opsel.loadModel(MODEL)
  assert.ok(golden.queries.length >= 10)
  for (const q of golden.queries) {
    checkPrediction(m.classify(Float64Array.from(q.window)), q)
    const probs = m.classProbabilities(Float64Array.from(q.window))
    assert.ok(probs instanceof Float64Array)
    q.probabilities.forEach((want, i) => close(probs[i], want, `query ${q.id} probability ${i}`))
  }
})

test('Model.classifyBatch resolves to the golden predictions, off the event loop', async () => {
  const m = opsel.loadModel(MODEL)
  const flat = flatQueries()
  const ps = await m.classifyBatch(flat, 2)
  assert.equal(ps.length, golden.queries.length)
  ps.forEach((p, i) => checkPrediction(p, golden.queries[i]))

  // A large batch: the event loop keeps turning while it runs. Were the work
  // done on the main thread, no interval tick could fire before it resolves.
  const reps = 100
  const big = new Float64Array(flat.length * reps)
  for (let r = 0; r < reps; r++) big.set(flat, r * flat.length)
  let ticks = 0
  const iv = setInterval(() => { ticks++ }, 1)
  const pending = m.classifyBatch(big, 1)
  const all = await pending
  clearInterval(iv)
  assert.equal(all.length, golden.queries.length * reps)
  checkPrediction(all[all.length - 1], golden.queries[golden.queries.length - 1])
  assert.ok(ticks > 0, `event loop was blocked during classifyBatch (ticks=${ticks})`)
})

test('dtwDistance reproduces the golden DTW pairs', () => {
  assert.ok(golden.dtw.length >= 5)
  golden.dtw.forEach((p, j) => {
    const radius = p.radius === null ? Infinity : p.radius
    const d = opsel.dtwDistance(Float64Array.from(p.a), Float64Array.from(p.b), { radius, cost: p.cost })
    close(d, p.distance, `pair ${j}`)
  })
  // Defaults: radius 10, abs.
  assert.equal(opsel.dtwDistance(Float64Array.from([1, 2, 3, 4, 5]), Float64Array.from([2, 3, 4, 5, 6])), 2)
})

test('KnnDtw fit/predict/save on the fixture references reproduces the golden classes', () => {
  const file = JSON.parse(fs.readFileSync(MODEL, 'utf8'))
  const w = file.window
  const x = new Float64Array(file.references.windows.length * w)
  file.references.windows.forEach((r, i) => x.set(r, i * w))
  const labels = file.references.labels.map((l) => file.classes[l])
  const clf = new opsel.KnnDtw({ k: file.k, radius: file.dtw.radius, cost: file.dtw.cost })
  clf.fit(x, w, labels)
  // Classes become the sorted distinct labels, as in scikit-learn.
  assert.deepEqual(clf.classes, [...golden.model.classes].sort())
  const flat = flatQueries()
  assert.deepEqual(clf.predict(flat), golden.queries.map((q) => q.class))

  const dir = tmpdir()
  try {
    const saved = path.join(dir, 'knn.json')
    clf.save(saved)
    const m = opsel.loadModel(saved)
    golden.queries.forEach((q) => {
      const p = m.classify(Float64Array.from(q.window))
      assert.equal(p.class, q.class)
      assert.equal(p.votes, q.votes)
      close(p.distance, q.distance, `saved query ${q.id}`)
    })
    assert.deepEqual(opsel.KnnDtw.load(saved).predict(flat), clf.predict(flat))
    // toModel shares the fitted references.
    checkPrediction(clf.toModel().classify(Float64Array.from(golden.queries[0].window)),
      { ...golden.queries[0], class_index: clf.classes.indexOf(golden.queries[0].class) })
    // JSON round trip.
    const again = opsel.modelFromJson(opsel.loadModel(MODEL).toJson())
    checkPrediction(again.classify(Float64Array.from(golden.queries[5].window)), golden.queries[5])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

function throwsCode (fn, code, needle) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, 'is an Error')
    assert.equal(e.code, code, e.message)
    if (needle) assert.match(e.message, needle)
    return true
  })
}

test('bad input throws Error objects with a code', async () => {
  const m = opsel.loadModel(MODEL)
  const w = new Float64Array(20).fill(70)
  const nan = Float64Array.from(w); nan[4] = NaN
  throwsCode(() => m.classify(nan), 'OPSEL_INVALID_INPUT', /index 4/)
  throwsCode(() => m.classify(new Float64Array(19)), 'OPSEL_INVALID_INPUT', /19 samples/)
  throwsCode(() => m.classify(new Float64Array(0)), 'OPSEL_INVALID_INPUT', /0 samples/)
  throwsCode(() => opsel.dtwDistance(nan, w), 'OPSEL_INVALID_INPUT', /index 4/)
  throwsCode(() => opsel.dtwDistance(new Float64Array(0), w), 'OPSEL_INVALID_INPUT', /non-empty/)
  throwsCode(() => opsel.dtwDistance(w, w, { cost: 'cosine' }), 'OPSEL_INVALID_INPUT', /cosine/)
  throwsCode(() => opsel.dtwDistance(w, w, { radius: -1 }), 'OPSEL_INVALID_INPUT', /radius -1/)
  throwsCode(() => opsel.dtwDistance(w, w, { radius: 2.5 }), 'OPSEL_INVALID_INPUT', /radius 2.5/)
  throwsCode(() => opsel.loadModel('/nonexistent/opsel/model.json'), 'OPSEL_IO', /nonexistent/)
  throwsCode(() => opsel.modelFromJson('{"format":"other"}'), 'OPSEL_INVALID_MODEL', /not an opsel model/)
  throwsCode(() => opsel.modelFromJson('not json'), 'OPSEL_INVALID_MODEL')
  throwsCode(() => opsel.modelFromJson('{"format":"opsel-model","version":5,"kind":"knn-dtw"}'),
    'OPSEL_UNSUPPORTED_VERSION', /version 5/)
  throwsCode(() => new opsel.KnnDtw({ normalization: 'log' }), 'OPSEL_INVALID_INPUT', /log/)
  throwsCode(() => new opsel.KnnDtw().predict(w), 'OPSEL_INVALID_INPUT', /not fitted/)
  throwsCode(() => new opsel.KnnDtw().fit(w, 20, ['a', 'b']), 'OPSEL_INVALID_INPUT', /windows/)
  throwsCode(() => new opsel.KnnDtw({ k: 3 }).fit(w, 20, ['a']), 'OPSEL_INVALID_INPUT', /k = 3/)
  throwsCode(() => m.save('/nonexistent/dir/m.json'), 'OPSEL_IO')

  // Async: the promise rejects with a coded Error naming the bad window.
  const batch = new Float64Array(60).fill(70); batch[45] = Infinity
  await assert.rejects(m.classifyBatch(batch), (e) => {
    assert.ok(e instanceof Error)
    assert.equal(e.code, 'OPSEL_INVALID_INPUT')
    assert.match(e.message, /window 2/)
    return true
  })
  await assert.rejects(m.classifyBatch(new Float64Array(30)), (e) => e.code === 'OPSEL_INVALID_INPUT' && /whole number/.test(e.message))
  await assert.rejects(m.classifyBatch(new Float64Array(0)), (e) => e.code === 'OPSEL_INVALID_INPUT')

  // A plain array is not a Float64Array: napi's own argument error.
  assert.throws(() => m.classify([1, 2, 3]), Error)
  // The model is still usable after every error.
  assert.equal(m.classify(w).votes > 0, true)
})
