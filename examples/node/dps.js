// DPS (document 002) in Node: two flows on one host share a 10 Mbit/s,
// 40 ms path; each flow's DpsAgent learns which CCA meets its QoS, and a
// FairManager unlocks one flow at a time (Alg 4). The path is a toy model so
// the example runs anywhere in a second; on a real socket, feed TCP_INFO's RTT
// and delivery rate instead and apply each "setCca" with setCca().
//
//   node examples/node/dps.js
'use strict'
const { DpsAgent, FairManager } = require('../../bindings/node')

const S = 1e9
const SPEC = {
  ccas: ['cubic', 'bbr'],
  // 002 Table 5.2, time-scaled by 10: T = 6 s, t = 3 s.
  metrics: [
    { metric: 'rtt_ms', range: [0, 300, 0, 350], priority: 0.4 },
    { metric: 'throughput_mbps', range: [4.0, null, 3.0, null], priority: 0.6 }
  ],
  selectionPeriodMs: 6000,
  randomPeriodMs: 3000
}

// Per-flow [rttMs, mbps] on a 10 Mbit/s link for the CCAs in use.
function path (ccas) {
  const share = { cubic: 1.0, bbr: 1.6 }
  const w = ccas.map((c) => (c ? share[c] ?? 1.0 : 0))
  const total = w.reduce((a, b) => a + b, 0) || 1
  const rtt = ccas.includes('cubic') ? 120 : 60
  return w.map((x) => [rtt, (10 * x) / total])
}

const manager = new FairManager({ fThresh: 0.8 })
const agents = [0, 1].map((i) => new DpsAgent({ ...SPEC, seed: i + 1 }, true))
const ccas = [null, null]
agents.forEach((a, i) => { manager.register(i); a.start(0) })
for (let t = 1; t <= 120; t++) {
  for (let m; (m = manager.poll()) !== null;) agents[m.flow].handleCommand(t * S, m.command)
  agents.forEach((a, i) => {
    for (let o; (o = a.poll()) !== null;) {
      if (o.kind === 'setCca') ccas[i] = o.cca
      else if (o.kind === 'report') manager.handleReport(i, o)
    }
  })
  path(ccas).forEach(([rtt, mbps], i) => {
    if (ccas[i]) { agents[i].feedback(t * S, rtt, mbps); manager.reportRate(i, mbps) }
  })
  manager.evaluate()
}
agents.forEach((a, i) => console.log(`flow ${i}: ${a.current}, learning=${a.learning}, ${a.stats().periods} periods`))
console.log(`manager: ${JSON.stringify(manager.stats())}, last Jain ${manager.lastJain.toFixed(3)}`)
