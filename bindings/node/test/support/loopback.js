'use strict'
// Shared by the socket tests (sys, ops_driver, ops_driver_policy): a connected
// loopback TCP pair whose server side counts, hashes and counts non-zero bytes,
// and a polling wait. Not a test file itself (node --test loads it and finds none).
const crypto = require('node:crypto')
const net = require('node:net')

function tcpPair () {
  return new Promise((resolve, reject) => {
    const state = { received: 0, nonzero: 0, hash: crypto.createHash('sha256') }
    const server = net.createServer((peer) => {
      state.peer = peer
      peer.on('data', (b) => {
        state.received += b.length
        state.hash.update(b)
        if (b.some((v) => v !== 0)) state.nonzero++
      })
      if (state.client) resolve(state)
    })
    server.listen(0, '127.0.0.1', () => {
      const client = net.connect(server.address().port, '127.0.0.1', () => {
        state.client = client
        state.server = server
        if (state.peer) resolve(state)
      })
      client.on('error', reject)
    })
  })
}

function closePair (s) {
  s.client.destroy()
  s.peer.destroy()
  s.server.close()
}

async function until (cond, ms = 5000) {
  const end = Date.now() + ms
  while (!cond() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 5))
}

module.exports = { tcpPair, closePair, until }
