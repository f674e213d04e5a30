// DpsAgent and FairManager: the core's DPS learner (002) through thin
// conversions. The scenario is the core's own doc example
// (core/src/dps/mod.rs), so Node must reach the same decisions.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { DpsAgent, FairManager } = require('..');

const S = 1e9;
const SPEC = {
  ccas: ['cubic', 'bbr'],
  metrics: [
    { metric: 'rtt_ms', range: [0, 300, 0, 350], priority: 0.4 },
    { metric: 'throughput_mbps', range: [9.5, null, 8, null], priority: 0.6 },
  ],
  selectionPeriodMs: 6000,
  randomPeriodMs: 3000,
  seed: 1,
};

function run(agent, seconds = 120) {
  let cca = null;
  const outputs = [];
  agent.start(0);
  for (let t = 1; t <= seconds; t++) {
    for (let o; (o = agent.poll()) !== null; ) {
      outputs.push(o);
      if (o.kind === 'setCca') cca = o.cca;
    }
    agent.feedback(t * S, 60, cca === 'bbr' ? 9.8 : 8.5);
  }
  return outputs;
}

test('learns the CCA that meets the QoS, as the core does', () => {
  const agent = new DpsAgent(SPEC);
  const outputs = run(agent);
  assert.equal(agent.current, 'bbr');
  assert.equal(agent.stats().learningCycles, 2);
  assert.equal(agent.learning, false);
  const kinds = new Set(outputs.map((o) => o.kind));
  for (const k of ['setCca', 'decided', 'periodClosed', 'learnt']) assert.ok(kinds.has(k), k);
  const decided = outputs.find((o) => o.kind === 'decided');
  assert.ok('periodNs' in decided.decision && 'mode' in decided.decision);
  // The spec as JSON text (snake_case) gives the same run.
  const text = JSON.stringify({ ...SPEC, selection_period_ms: 6000, random_period_ms: 3000, selectionPeriodMs: undefined, randomPeriodMs: undefined });
  assert.deepEqual(run(new DpsAgent(text)), outputs);
});

test('bad specs and inputs get coded errors', () => {
  const bad = [
    [{ ...SPEC, metrics: [{ metric: 'rtt_ms', range: [400, 300, 0, 450] }] }, /400/],
    [{ ...SPEC, metrics: [{ metric: 'jitter_ms', range: [0, 1, 0, 2] }] }, /jitter_ms/],
    [{ ...SPEC, exploration: { pLearning: 1.5, pLearnt: 0.2 } }, /1\.5/],
    [{ ...SPEC, ccas: [] }, /ccas/],
  ];
  for (const [spec, msg] of bad) {
    assert.throws(() => new DpsAgent(spec), (e) => e.code === 'OPSEL_INVALID_INPUT' && msg.test(e.message));
  }
  const a = new DpsAgent(SPEC);
  a.start(0);
  assert.throws(() => a.feedback(S, NaN, 1), { code: 'OPSEL_INVALID_INPUT' });
  assert.throws(() => a.handleCommand(S, { cmd: 'explode' }), { code: 'OPSEL_INVALID_INPUT' });
  assert.throws(() => a.start(-1), { code: 'OPSEL_INVALID_INPUT' });
  assert.throws(() => new FairManager({ fThresh: 0 }), /f_thresh/);
});

test('the manager unlocks one managed agent at a time, round robin', () => {
  const manager = new FairManager({ fThresh: 0.8 });
  const agents = new Map([[1, new DpsAgent(SPEC, true)], [2, new DpsAgent(SPEC, true)]]);
  for (const [id, a] of agents) {
    manager.register(id);
    a.start(0);
    assert.deepEqual(a.phase, { phase: 'waiting' });
  }
  const seen = new Set();
  for (let t = 1; t < 200; t++) {
    for (let m; (m = manager.poll()) !== null; ) agents.get(m.flow).handleCommand(t * S, m.command);
    const active = [...agents.values()].filter((a) => ['guard', 'monitor'].includes(a.phase.phase));
    assert.ok(active.length <= 1);
    if (manager.unlocked !== null) seen.add(manager.unlocked);
    for (const [id, a] of agents) {
      let cca = a.current;
      for (let o; (o = a.poll()) !== null; ) {
        if (o.kind === 'report') manager.handleReport(id, o);
        if (o.kind === 'setCca') cca = o.cca;
      }
      a.feedback(t * S, 60, cca === 'bbr' ? 9.8 : 8.5);
      if (cca !== null) manager.reportRate(id, 5);
    }
    manager.evaluate();
  }
  assert.deepEqual([...seen].sort(), [1, 2]);
  assert.ok(manager.stats().unlocks >= 2);
  assert.equal(manager.lastJain, 1);
});
