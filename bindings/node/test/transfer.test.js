'use strict'
// sendFile / recvFile: one transfer over loopback inside this process. The
// receiver's socket is bound but not handed to libuv (recvFile makes it
// listen, so libuv does not accept its connections); the sender's is a
// net.Socket paused at connect (libuv does not read the control replies).
const test = require('node:test')
const assert = require('node:assert')
const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { sendFile, recvFile } = require('..')

function boundSocket () {
  // A bound, not yet listening TCP socket that libuv does not watch.
  const { TCP, constants } = process.binding('tcp_wrap')
  const h = new TCP(constants.SERVER)
  assert.strictEqual(h.bind('127.0.0.1', 0), 0)
  const addr = {}
  h.getsockname(addr)
  return { h, port: addr.port, fd: h.fd }
}

function connectPaused (port) {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => {
      c.pause()
      resolve(c)
    })
    c.on('error', reject)
  })
}

for (const hash of ['xxh3', 'blake3']) {
  test(`a file crosses loopback with ${hash} and the reports agree`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-node-xfer-'))
    try {
      const src = path.join(dir, 'src.bin')
      const dst = path.join(dir, 'dst.bin')
      const data = crypto.randomBytes(2_000_003)
      fs.writeFileSync(src, data)
      const l = boundSocket()
      const received = recvFile(l.fd, dst, { idleS: 10, acceptTimeoutS: 20 })
      const c = await connectPaused(l.port)
      const sent = await sendFile(c._handle.fd, src, { hash, cca: 'cubic' })
      const got = await received
      c.destroy()
      l.h.close()
      assert.deepStrictEqual(fs.readFileSync(dst), data)
      assert.strictEqual(sent.hash, hash)
      assert.strictEqual(got.hash, hash)
      assert.ok(sent.complete && sent.fileIdentical)
      assert.strictEqual(sent.driver.bytesSent, data.length)
      assert.strictEqual(got.received, data.length)
      assert.ok(got.verified && got.complete)
      assert.strictEqual(sent.digest, got.digest)
      assert.strictEqual(got.fileDigest, got.digest)
      assert.strictEqual(sent.digest.length, hash === 'xxh3' ? 32 : 64)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
}

test('a bad spec or descriptor is refused with a code', async () => {
  assert.throws(() => sendFile(0, '/nonexistent', { hsah: 'xxh3' }), (e) => e.code === 'OPSEL_INVALID_INPUT' && /hsah/.test(e.message))
  assert.throws(() => recvFile(-1, '/tmp/x'), (e) => e.code === 'OPSEL_INVALID_INPUT')
  // A descriptor that is not a connected socket: the Promise rejects.
  const l = boundSocket()
  await assert.rejects(sendFile(l.fd, __filename, {}), (e) => e.code !== undefined)
  l.h.close()
})
