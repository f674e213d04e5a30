// The OPS controller and policies through the Node binding: the
// shared golden fixture tests/fixtures/ops_golden.json (outputs of the Rust
// controller over a synthetic RTT trace), function policies and their
// exceptions, configuration errors, fairness.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const opsel = require('..')

const FIXTURES = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures')
const golden = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'ops_golden.json'), 'utf8'))
const MODEL = path.join(FIXTURES, golden.model_file)
const S = golden.sample_period_ns
const TRACE = golden.trace_rtt_ms

// The fixture's canonical line (ffi/examples/make_ops_golden.rs).
function render (o) {
  const u = (v) => (v === null || v === undefined ? 'none' : String(v))
  switch (o.kind) {
    case 'setCca': return `set_cca ${o.cca}`
    case 'sendFullSpeed': return `send_full_speed ${o.cca} until=${o.untilNs}`
    case 'silence': return `silence until=${o.untilNs}`
    case 'steady': return `steady ${o.cca} until=${u(o.untilNs)}`
    case 'phase': return `phase ${o.phase} cycle=${o.cycle} at=${o.atNs}`
    case 'classified': return `classified ${o.label} samples=${o.samples} early=${o.early} at=${o.atNs}`
    case 'selected': return `selected ${o.cca} steady=${u(o.steadyNs)} at=${o.atNs}`
    case 'decisionFailed': return `decision_failed at=${o.atNs}`
    case 'probeIncomplete': return `probe_incomplete samples=${o.samples} needed=${o.needed} at=${o.atNs}`
    default: throw new Error(`unknown kind ${o.kind}`)
  }
}

function controller (cfg, model = opsel.loadModel(MODEL)) {
  return new opsel.Controller(model, {
    mode: cfg.mode,
    pattern: cfg.pattern,
    steadyS: cfg.steady_s,
    policy: cfg.policy,
    adaptive: cfg.adaptive,
    progressive: cfg.progressive,
    prefixLens: cfg.prefix_lens,
    checkModel: cfg.check_model
  })
}

function run (ctl, trace = TRACE) {
  const out = []
  ctl.start(0)
  out.push(...ctl.drain())
  trace.forEach((rtt, k) => {
    const t = (k + 1) * S
    ctl.handleTimeout(t)
    ctl.handleSample(t, rtt)
    out.push(...ctl.drain())
  })
  return out
}

for (const sc of golden.scenarios) {
  test(`golden ${sc.name}: same outputs as the Rust controller`, () => {
    const ctl = controller(sc.config)
    assert.deepEqual(run(ctl).map(render), sc.expected)
    const st = ctl.stats()
    for (const [k, v] of Object.entries(sc.stats)) {
      const key = k.replace(/_(.)/g, (_, c) => c.toUpperCase())
      assert.equal(st[key], v, k)
    }
  })
}

test('a model path works like a Model object', () => {
  const cfg = golden.scenarios[0].config
  assert.deepEqual(run(controller(cfg, MODEL)).map(render), golden.scenarios[0].expected)
})

test('a function policy is called with the classification', () => {
  const seen = []
  const ctl = new opsel.Controller(MODEL, {
    steadyS: 10,
    policy: (c) => { seen.push(c); return c.bbrPresent ? 'reno' : 'cubic' }
  })
  const outs = run(ctl)
  const selected = outs.filter((o) => o.kind === 'selected').map((o) => o.cca)
  assert.ok(seen.length > 0)
  assert.deepEqual(selected, seen.map((c) => (c.bbrPresent ? 'reno' : 'cubic')))
  for (const k of ['label', 'classIndex', 'confidence', 'distance', 'bbrFlows', 'totalFlows']) assert.ok(k in seen[0], k)
  assert.ok(outs.some((o) => o.kind === 'setCca' && o.cca === 'reno'))
})

test('an exception in the policy becomes a coded error; the controller goes on', () => {
  const ctl = new opsel.Controller(MODEL, {
    steadyS: 10,
    policy: () => { throw new RangeError('my policy broke') }
  })
  ctl.start(0)
  let err = null
  for (let k = 0; k < 40 && !err; k++) {
    const t = (k + 1) * S
    ctl.handleTimeout(t)
    try { ctl.handleSample(t, TRACE[k]) } catch (e) { err = e }
  }
  assert.ok(err, 'handleSample threw')
  assert.equal(err.code, 'OPSEL_INVALID_INPUT')
  assert.match(err.message, /policy function threw RangeError: my policy broke/)
  const outs = ctl.drain()
  const failed = outs.find((o) => o.kind === 'decisionFailed')
  assert.ok(failed && /my policy broke/.test(failed.message))
  assert.equal(outs.find((o) => o.kind === 'steady').cca, 'cubic')
  // Still usable afterwards.
  ctl.handleTimeout(41 * S)
  ctl.handleSample(41 * S, TRACE[40])
})

test('a policy that calls back into its own controller gets an error, not a crash', () => {
  let ctl = null
  ctl = new opsel.Controller(MODEL, { steadyS: 10, policy: () => ctl.phase })
  ctl.start(0)
  let err = null
  for (let k = 0; k < 25 && !err; k++) {
    ctl.handleTimeout((k + 1) * S)
    try { ctl.handleSample((k + 1) * S, TRACE[k]) } catch (e) { err = e }
  }
  assert.ok(err && err.code === 'OPSEL_INVALID_INPUT' && /busy/.test(err.message), String(err))
})

test('configuration errors name the value', () => {
  const bad = [
    [{ mode: 'active', pattern: 'S5-X5' }, /X5/],
    [{ policy: 'B1-C0=bbr' }, /no entry for mix/],
    [{ mode: 'sideways' }, /mode/],
    [{ steadyJitter: 0.9 }, /steady_jitter/],
    [{ policy: 42 }, /"policy".*42/],
    [{ steadyS: 1, noSuchOption: 1 }, /no_such_option/],
    [{ mode: 'active' }, /passive probing/]
  ]
  for (const [opts, re] of bad) {
    assert.throws(() => new opsel.Controller(MODEL, opts), (e) => e.code === 'OPSEL_INVALID_INPUT' && re.test(e.message), JSON.stringify(opts))
  }
  assert.throws(() => new opsel.Controller('/nonexistent/model.json'), (e) => e.code === 'OPSEL_IO')
  assert.throws(() => new opsel.Controller(42), (e) => e.code === 'OPSEL_INVALID_INPUT')
  const ctl = new opsel.Controller(MODEL)
  ctl.start(0)
  assert.throws(() => ctl.handleSample(S, NaN), (e) => e.code === 'OPSEL_INVALID_INPUT')
  assert.throws(() => ctl.handleSample(-1, 50), (e) => e.code === 'OPSEL_INVALID_INPUT' && /nowNs/.test(e.message))
})

test('properties and stats', () => {
  const ctl = new opsel.Controller(MODEL, { mode: 'active', steadyS: 20, adaptive: { minS: 10, maxS: 80 }, checkModel: false })
  assert.equal(ctl.phase, 'idle')
  assert.equal(ctl.windowLen, 20)
  assert.equal(ctl.socketCca, 'cubic')
  assert.deepEqual(ctl.classes, opsel.loadModel(MODEL).classes)
  run(ctl)
  const st = ctl.stats(TRACE.length * S)
  assert.ok(st.decisions >= 3)
  assert.equal(st.probeNs + st.steadyNs, TRACE.length * S)
  assert.ok(ctl.steadyNs >= 10e9 && ctl.steadyNs <= 80e9)
})

test('fairness', () => {
  assert.equal(opsel.jain([250, 250]), 1)
  assert.ok(Math.abs(opsel.jain([500, 0]) - 0.5) < 1e-12)
  assert.equal(opsel.fairShare(500e6, 2), 250e6)
  assert.throws(() => opsel.jain([1, NaN]), (e) => e.code === 'OPSEL_INVALID_INPUT')
  assert.throws(() => opsel.fairShare(500e6, 0), (e) => e.code === 'OPSEL_INVALID_INPUT')
})

test('cycles: default 1, round-trips, validated, per-window events', () => {
  assert.equal(new opsel.Controller(opsel.loadModel(MODEL)).cycles, 1)
  const ctl = new opsel.Controller(opsel.loadModel(MODEL), { cycles: 2, steadyS: 10 })
  assert.equal(ctl.cycles, 2)
  for (const bad of [0, 101]) {
    assert.throws(() => new opsel.Controller(opsel.loadModel(MODEL), { cycles: bad }),
      (e) => e.message.includes(`cycles = ${bad}`))
  }
  ctl.start(0)
  const out = []
  for (let t = 1; t <= 2 * ctl.windowLen; t++) {
    ctl.handleSample(t * S, 60 + (t % 5))
    out.push(...ctl.drain())
  }
  const ev = out.filter((o) => o.kind === 'cycleClassified')
  assert.deepEqual(ev.map((e) => [e.index, e.cycles]), [[0, 2], [1, 2]])
  assert.ok(ev.every((e) => ctl.classes[e.leaderIndex] === e.leader && ctl.classes[e.classIndex] === e.label))
  assert.ok(ev.every((e) => ctl.classes.includes(e.label) && e.margin >= 0 && e.margin <= 1))
  const cl = out.filter((o) => o.kind === 'classified')
  assert.equal(cl[0].label, ev[1].leader)
  assert.equal(cl[0].samples, 2 * ctl.windowLen)
})
