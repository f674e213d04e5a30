// opsel Node example: run OPS on your own TCP connection with the driver.
//
// 1. Opens a loopback TCP connection with net (stand-in for your bulk
//    transfer; its descriptor is socket._handle.fd) and a UDP echo responder
//    with a 20 ms delay line (stand-in for the peer's echo port, e.g.
//    `opsel recv`).
// 2. Builds an OpsDriver: active probing with the pattern
//    cubic:1-silence:1-X:1 (X = bbr when this process may set it, else
//    reno), steady time Y = 2 s, 5 s time limit, and a JS policy function:
//    the thesis stump (BBR in the background -> X, else cubic) written in
//    JavaScript. The driver calls it on the JS thread at each decision.
// 3. Runs it off the event loop, sending from a file (here /dev/zero), and
//    prints every phase, classification, policy call, CCA switch, decision
//    latency and RTT sample as the events arrive, while the event loop
//    stays free.
//
//   node examples/node/ops_driver.js tests/fixtures/ops_driver_tiny.model.json
//
// With a real model (models/active-s5c5s5b5/model.json) use its pattern
// ("S5-C5-S5-B5"), the default steady time and the peer's echo address.
'use strict'
const net = require('node:net')
const opsel = require('../../bindings/node')

function loopbackPair () {
  return new Promise((resolve) => {
    const server = net.createServer((peer) => resolve({ server, peer, client }))
    let client
    server.listen(0, '127.0.0.1', () => {
      client = net.connect(server.address().port, '127.0.0.1')
    })
  })
}

function show (e) {
  switch (e.kind) {
    case 'phase': console.log(`phase    ${e.phase} (cycle ${e.cycle})`); break
    case 'classified': console.log(`class    ${e.label} (confidence ${e.confidence.toFixed(2)}, ${e.samples} samples)`); break
    case 'ccaSet': console.log(`cca      ${e.cca} set on the socket`); break
    case 'decision': console.log(`decision ${e.cca} carried out ${(e.latencyNs / 1e3).toFixed(1)} us after the last RTT sample`); break
    case 'rtt': console.log(e.rttMs == null ? 'rtt      lost' : `rtt      ${e.rttMs.toFixed(2)} ms`); break
  }
}

async function main () {
  const modelPath = process.argv[2]
  if (!modelPath) {
    console.error('usage: node ops_driver.js MODEL.json (w = 3, e.g. tests/fixtures/ops_driver_tiny.model.json)')
    process.exit(2)
  }
  const { server, peer, client } = await loopbackPair()
  await new Promise((resolve) => (client.readyState === 'open' ? resolve() : client.once('connect', resolve)))
  let received = 0
  peer.on('data', (b) => { received += b.length })

  const root = typeof process.getuid === 'function' && process.getuid() === 0
  const x = opsel.availableCcas().includes('bbr') && (root || opsel.allowedCcas().includes('bbr')) ? 'bbr' : 'reno'
  const pattern = `cubic:1-silence:1-${x}:1`
  const echo = new opsel.UdpEchoResponder('127.0.0.1:0', 20)
  let policyCalls = 0
  const policy = (c) => {
    policyCalls++
    const cca = c.bbrPresent ? x : 'cubic'
    console.log(`policy   ${c.label} (${c.bbrFlows}/${c.totalFlows} BBR flows) -> ${cca}`)
    return cca
  }
  const drv = new opsel.OpsDriver(
    modelPath,
    // The tiny model was probed with cubic:1-silence:1-bbr:1: the model/pattern
    // check holds only when bbr can be used.
    { mode: 'active', pattern, steadyS: 2, policy, checkModel: x === 'bbr' },
    // A policy that does not answer within policyTimeoutS stops the driver.
    { probe: `127.0.0.1:${echo.port}`, timeLimitS: 5, policyTimeoutS: 2 }
  )
  console.log(`OPS with ${pattern}, RTT probe toward 127.0.0.1:${echo.port}`)
  let ticks = 0
  const timer = setInterval(() => ticks++, 100)
  const rep = await drv.run(client._handle.fd, '/dev/zero', show, false)
  clearInterval(timer)
  while (received < rep.bytesSent) await new Promise((resolve) => setTimeout(resolve, 10))
  console.log(`sent ${(rep.bytesSent / 1e6).toFixed(1)} MB (${rep.end}), ${rep.ccaSets} CCA switches, ` +
    `${rep.stats.decisions} decisions; the event loop ticked ${ticks} times meanwhile`)
  echo.stop()
  client.destroy()
  peer.destroy()
  server.close()
  if (received !== rep.bytesSent || rep.bytesSent === 0) process.exit(1)
  if (policyCalls !== rep.stats.decisions || policyCalls === 0) process.exit(1)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
