// opsel Node example: send a file with OPS choosing the congestion control.
//
// 1. Starts a receiver (recvFile) on a loopback socket; it also answers the
//    sender's UDP RTT echoes on its port.
// 2. Sends a 64 MiB file with sendFile and an `ops` spec: OPS probes the
//    path, classifies the background mix, picks a CCA and sets it on the
//    live connection, off the event loop. An AbortController aborted by a
//    timer ends the send early if it still runs after STOP_AFTER_S seconds
//    (default 30); the receiver then keeps the bytes sent as a verified
//    prefix (resume with `{ resume: true }`).
// 3. Prints the decisions and the CCAs used (report.ops).
//
//   node examples/node/send_file_ops.js tests/fixtures/ops_send_silent.model.json S3
//
// (a tiny model whose probe is 3 silent RTT samples: one decision, then the file).
// Without arguments it uses the shipped passive model ("default"), whose
// first decision needs a 40 s window: on loopback the file is sent before.
'use strict'
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const opsel = require('../../bindings/node')

function boundSocket () {
  // A bound socket that libuv does not watch: recvFile makes it listen.
  const { TCP, constants } = process.binding('tcp_wrap')
  const h = new TCP(constants.SERVER)
  if (h.bind('127.0.0.1', 0) !== 0) throw new Error('bind')
  const addr = {}
  h.getsockname(addr)
  return { h, port: addr.port, fd: h.fd }
}

function connectPaused (port) {
  // The library reads the control replies itself: libuv must not.
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => { c.pause(); resolve(c) })
    c.on('error', reject)
  })
}

async function main () {
  const model = process.argv[2] || 'default'
  const pattern = process.argv[3] || 'passive'
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-send-ops-'))
  try {
    const src = path.join(dir, 'src.bin')
    const fd = fs.openSync(src, 'w')
    for (let i = 0; i < 64; i++) fs.writeSync(fd, Buffer.alloc(1 << 20, i))
    fs.closeSync(fd)
    const l = boundSocket()
    const received = opsel.recvFile(l.fd, path.join(dir, 'dst.bin'), { idleS: 60 })
    const c = await connectPaused(l.port)
    const ops = { model }
    if (pattern !== 'passive') {
      // An active pattern: probe, decide once (steadyS 0), then send the rest
      // with the chosen CCA; a table policy keeps the example independent of
      // which CCAs this host may set.
      Object.assign(ops, { pattern, steadyS: 0, leadIn: false, policy: '*=reno' })
    }
    const ac = new AbortController()
    const timer = setTimeout(() => ac.abort(), 1000 * Number(process.env.STOP_AFTER_S || 30))
    const report = await opsel.sendFile(c._handle.fd, src, { ops }, ac.signal)
    clearTimeout(timer)
    const got = await received
    c.destroy()
    l.h.close()
    console.log(`sent ${report.driver.bytesSent} bytes, end: ${report.driver.end}, complete: ${report.complete}`)
    for (const d of report.ops.decisions) {
      console.log(`decision: ${d.class} (confidence ${d.confidence.toFixed(2)}, ${d.samples} samples) -> ${d.cca}`)
    }
    console.log(`CCAs used: ${report.ops.ccas.join(' -> ')}`)
    console.log(`receiver: verified ${got.verified}, kept ${got.fileSize} bytes`)
    process.exitCode = got.verified ? 0 : 1
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
