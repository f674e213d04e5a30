// The OPS probe gate through the Node binding (ops::ProbeGate, 004 §8 B.1):
// a controller built with the shipped gate (models/passive/gate.json) ends a
// probe at one of the gate's check lengths with the full window's decision
// and counts it in stats().gateExits; threshold 1 never fires; bad gate
// options are errors.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const opsel = require('..')

const MODELS = path.join(__dirname, '..', '..', '..', 'models', 'passive')
const MODEL = path.join(MODELS, 'model.json')
const GATE = path.join(MODELS, 'gate.json')
const S = 1e9

// Reference window i of the shipped model with a small deterministic ripple
// (as core/tests/alloc_ops_gate.rs): near, but not at, distance 0.
function trace (i) {
  const file = JSON.parse(fs.readFileSync(MODEL, 'utf8'))
  return file.references.windows[i].map((v, k) => v * (1 + 0.003 * ((k % 5) - 2)))
}

function firstDecision (ctl, q) {
  ctl.start(0)
  const out = []
  for (let t = 0; t < q.length; t++) {
    const now = (t + 1) * S
    ctl.handleTimeout(now)
    ctl.handleSample(now, q[t])
    out.push(...ctl.drain())
    if (ctl.phase !== 'probe') break
  }
  const cl = out.filter((o) => o.kind === 'classified')
  assert.equal(cl.length, 1)
  return [cl[0], ctl.stats()]
}

test('the shipped gate ends the probe at a check with the full window decision', () => {
  const checks = JSON.parse(fs.readFileSync(GATE, 'utf8')).checks
  const q = trace(9)
  const [full, sFull] = firstDecision(new opsel.Controller(MODEL), q)
  assert.equal(full.samples, 40)
  assert.equal(sFull.gateExits, 0)
  const [gated, s] = firstDecision(new opsel.Controller(MODEL, { gate: GATE }), q)
  assert.ok(checks.includes(gated.samples) && gated.samples < 40, `samples ${gated.samples}`)
  assert.equal(gated.label, full.label)
  assert.equal(s.gateExits, 1)
  assert.equal(s.decisions, 1)
  assert.equal(s.probeNs, gated.samples * S)
})

test('gateThreshold 1 never fires', () => {
  const [ev, s] = firstDecision(new opsel.Controller(MODEL, { gate: GATE, gateThreshold: 1 }), trace(9))
  assert.equal(ev.samples, 40)
  assert.equal(s.gateExits, 0)
})

test('bad gate options are errors', () => {
  assert.throws(() => new opsel.Controller(MODEL, { gateThreshold: 0.9 }), /gate_threshold/)
  assert.throws(() => new opsel.Controller(MODEL, { gate: GATE, gateThreshold: 2 }), /probability/)
  assert.throws(() => new opsel.Controller(MODEL, { gate: path.join(MODELS, 'no-such-gate.json') }))
})
