// opsel Node example: act on a live TCP socket and run the OPS controller.
//
// 1. Opens a loopback TCP connection with net (stand-in for your bulk
//    transfer), takes its descriptor from socket._handle.fd, switches the
//    congestion control live and reads it back, prints TCP_INFO.
// 2. Sends a paced UDP probe train off the event loop and reports the backend
//    chosen and the achieved departure gaps.
// 3. Takes 1 Hz RTT samples the 000 way (10 UDP echoes 1 ms apart, averaged)
//    through a 30 ms delay line and feeds them to a passive OPS controller
//    with a JavaScript policy; applies its setCca actions to the socket.
//
//   node examples/node/sys_ops.js tests/fixtures/knn_golden.model.json
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

async function main () {
  const modelPath = process.argv[2]
  if (!modelPath) {
    console.error('usage: node sys_ops.js MODEL.json')
    process.exit(2)
  }
  const { server, peer, client } = await loopbackPair()
  await new Promise((resolve) => (client.readyState === 'open' ? resolve() : client.once('connect', resolve)))
  const fd = client._handle.fd // the numeric descriptor of a connected net.Socket
  console.log('available CCAs:', opsel.availableCcas().join(' '))
  console.log('switched to', opsel.setCca(fd, 'bbr'), '(read back)')
  const info = opsel.tcpInfo(fd)
  console.log(`TCP_INFO: srtt ${info.rttUs} us, cwnd ${info.sndCwnd}, mss ${info.sndMss}`)

  const rx = new opsel.ProbeReceiver('127.0.0.1:0')
  const tx = new opsel.PacedSender(`127.0.0.1:${rx.port}`)
  console.log(`paced sender backend: ${tx.backend} (${tx.txtime.reason})`)
  const schedule = Float64Array.from({ length: 100 }, (_, i) => i * 100000)
  const pending = rx.recvTrain(100)
  const report = await tx.sendTrain(schedule, 1200)
  const got = await pending
  const gaps = []
  for (let i = 1; i < report.departureNs.length; i++) gaps.push((report.departureNs[i] - report.departureNs[i - 1]) / 1e3)
  gaps.sort((a, b) => a - b)
  console.log(`train of 100 packets 100 us apart: received ${got.seq.length}, median departure gap ${gaps[gaps.length >> 1].toFixed(1)} us`)

  opsel.setCca(fd, 'cubic') // the controller assumes its initial CCA
  const ctl = new opsel.Controller(modelPath, {
    steadyS: 60,
    // A user policy: the thesis stump, but keep cubic when the classifier is unsure.
    policy: (c) => (c.bbrPresent && c.confidence >= 0.5 ? 'bbr' : 'cubic')
  })
  const resp = new opsel.UdpEchoResponder('127.0.0.1:0', 30)
  const prober = new opsel.UdpEchoProber(`127.0.0.1:${resp.port}`)
  let decided = null
  ctl.start(0)
  for (let t = 1; t <= 40 && !decided; t++) {
    const sample = await prober.burst() // 10 echoes 1 ms apart -> one 1 Hz sample (000 §3.2)
    ctl.handleTimeout(t * 1e9)
    ctl.handleSample(t * 1e9, sample.meanRttMs)
    for (const o of ctl.drain()) {
      if (o.kind === 'setCca') console.log(`t=${t}s setCca -> socket now ${opsel.setCca(fd, o.cca)}`)
      if (o.kind === 'classified') console.log(`t=${t}s window classified as ${o.label} (confidence ${o.confidence.toFixed(2)})`)
      if (o.kind === 'selected') {
        console.log(`t=${t}s policy chose ${o.cca} for ${o.steadyNs / 1e9} s`)
        decided = o.cca
      }
    }
  }
  resp.stop()
  console.log('socket CCA at the end:', opsel.getCca(fd))
  client.destroy()
  peer.destroy()
  server.close()
  if (!decided) process.exit(1)
}

main().catch((e) => {
  console.error(`${e.code || 'Error'}: ${e.message}`)
  process.exit(1)
})
