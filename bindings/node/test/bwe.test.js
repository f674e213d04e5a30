// Bandwidth estimation (document 001) through the Node binding, against the shared
// golden fixture tests/fixtures/bwe_golden.json (also used by Rust, C and Python).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const opsel = require('..')

const FIXTURES = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures')
const golden = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'bwe_golden.json'), 'utf8'))
const TOL = golden.tolerance.relative

function close (got, want, what) {
  assert.ok(Math.abs(got - want) <= TOL * Math.max(1, Math.abs(want)), `${what}: ${got} vs ${want}`)
}

function check (a, want, what) {
  close(a.abestBps, want.abest_bps, what)
  assert.equal(a.excursionStart ?? null, want.excursion_start, `${what} excursionStart`)
  assert.equal(a.belowRange, want.below_range, `${what} belowRange`)
  assert.equal(a.aboveRange, want.above_range, `${what} aboveRange`)
}

test('golden p-streams: BASS + ABest and ML', () => {
  const ml = opsel.BweMl.load(path.join(FIXTURES, golden.model_file), 64)
  assert.equal(ml.nPackets, 64)
  golden.streams.forEach((s, i) => {
    const gs = Float64Array.from(s.send_gaps_ns)
    const gr = Float64Array.from(s.recv_gaps_ns)
    const r = s.spec.r_avg_bps
    const ps = { nRates: 4, packetsPerRate: 16, range: 0.5, packetBytes: 9038 }
    check(opsel.bweEstimate(gs, gr, r, ps), s.bass_thesis, `stream ${i} thesis`)
    check(opsel.bweEstimate(gs, gr, r, ps, { thresholds: 'relative', referenceGapNs: golden.reference_gap_ns }), s.bass_relative, `stream ${i} relative`)
    check(opsel.bweEstimate(gs, gr, r, ps, { window: 'centred' }), s.bass_centred, `stream ${i} centred`)
    close(ml.estimate(gs, gr, r), s.ml_bps, `stream ${i} ML`)
  })
})

test('golden single-rate decisions, p-stream rates, rate adapter', () => {
  for (const s of golden.single_rate) {
    const gs = Float64Array.from(s.send_gaps_ns)
    const gr = Float64Array.from(s.recv_gaps_ns)
    assert.equal(opsel.bweDecideSingleRate(gs, gr), s.exceeds_thesis_rule)
    assert.equal(opsel.bweDecideSingleRate(gs, gr, 0.02), s.exceeds_tol_0_02)
  }
  // 001 Ch 5 baselines: Pathload PCT/PDT on one-way delays, raw Pathload, IMR-avg, IMR-wavelet.
  const seen = new Set()
  for (const b of golden.baselines) {
    const gs = Float64Array.from(b.send_gaps_ns)
    const gr = Float64Array.from(b.recv_gaps_ns)
    const owd = new Float64Array(gs.length)
    let d = 0
    for (let k = 0; k < gs.length; k++) { d += gr[k] - gs[k]; owd[k] = d }
    const t = opsel.bweTrend(owd)
    assert.equal(t.trend, b.owd_trend)
    close(t.pct, b.owd_pct, 'pct')
    close(t.pdt, b.owd_pdt, 'pdt')
    for (const [method, key] of [['pathload', 'pathload'], ['imr-avg', 'imr_avg'], ['imr-wavelet', 'imr_wavelet_3']]) {
      const got = opsel.bweBaseline(gs, gr, method)
      assert.equal(got, b[key], `${method}`)
      seen.add(got)
    }
    assert.equal(opsel.bweBaseline(gs, gr), b.imr_avg)
  }
  assert.deepEqual([...seen].sort(), ['ambiguous', 'increasing', 'no_trend'])
  const flat = new Float64Array(16).fill(10000)
  assert.throws(() => opsel.bweBaseline(flat, flat, 'pathchirp'), /method/)
  assert.throws(() => opsel.bweBaseline(flat, flat, 'imr-wavelet'), /need >= 8/)
  assert.throws(() => opsel.bweTrend(new Float64Array([1])), /at least 2/)
  const range = 1.15 ** 3 - 1
  const rates = opsel.pstreamRates(7e9, { range })
  golden.thesis_pstream_7gbps.rates_bps.forEach((w, k) => close(rates[k], w, `rate ${k}`))
  const gaps = opsel.pstreamSendGaps(7e9, { range })
  assert.equal(gaps.length, 64)
  golden.thesis_pstream_7gbps.send_gaps_ns.forEach((w, k) => close(gaps[k], w, `gap ${k}`))
  const a = new opsel.RateAdapter({ initBps: golden.adapter.init_bps })
  for (const st of golden.adapter.steps) {
    const r = a.onEstimate(st.abest_bps, st.duration_ns)
    assert.equal(r !== null && r !== undefined, st.updated)
    close(a.rAvgBps, st.r_avg_bps, 'rAvgBps')
  }
  close(a.onLoss(), golden.adapter.after_loss_bps, 'after loss')
})

test('bad input throws coded errors', () => {
  const gs = new Float64Array(64).fill(10329)
  const gr = new Float64Array(64).fill(10400)
  assert.throws(() => opsel.bweEstimate(gs.subarray(0, 32), gr.subarray(0, 32), 7e9), { code: 'OPSEL_INVALID_INPUT', message: /64 packets/ })
  const bad = Float64Array.from(gs)
  bad[5] = NaN
  assert.throws(() => opsel.bweEstimate(bad, gr, 7e9), { code: 'OPSEL_INVALID_INPUT', message: /send gaps/ })
  assert.throws(() => opsel.bweEstimate(gs, gr, 7e9, null, { window: 'sideways' }), { code: 'OPSEL_INVALID_INPUT' })
  assert.throws(() => opsel.BweMl.load(path.join(FIXTURES, golden.model_file), 32), { code: 'OPSEL_INVALID_INPUT', message: /66 features/ })
  assert.throws(() => opsel.BweMl.fromJson('{"format":"nope"}'), { code: 'OPSEL_INVALID_MODEL' })
  assert.throws(() => opsel.BweMl.load('/nonexistent/model.json'), { code: 'OPSEL_IO' })
  assert.throws(() => new opsel.RateAdapter({ etaParam: 'sometimes' }), { code: 'OPSEL_INVALID_INPUT' })
})

test('the shipped fft-reim model (models/bwe-mr) reproduces scikit-learn through the binding', () => {
  const root = path.join(__dirname, '..', '..', '..')
  const fx = JSON.parse(fs.readFileSync(path.join(root, 'core', 'tests', 'fixtures', 'bwe_mr_rx120.json'), 'utf8'))
  const model = path.join(root, 'models', 'bwe-mr', 'mr_gbt_rx120.json')
  const ml = opsel.BweMl.load(model, 64)
  fx.streams.forEach((s, i) => {
    const want = fx.expected[i] * s.r_avg_bps
    const got = ml.estimate(Float64Array.from(s.gs), Float64Array.from(s.gr), s.r_avg_bps)
    assert.ok(Math.abs(got - want) <= 1e-9 * want, `stream ${i}: ${got} vs ${want}`)
  })
  assert.throws(() => opsel.BweMl.load(model, 32), { code: 'OPSEL_INVALID_INPUT', message: /neither fft-magnitude/ })
})
