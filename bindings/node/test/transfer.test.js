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

// The shared model of the OPS send tests: a silent probe of 3 samples, so the decision
// comes before any byte moves however fast loopback is (tests/fixtures/README.md).
const SILENT = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures', 'ops_send_silent.model.json')
const OPS = { model: SILENT, pattern: 'S3', steadyS: 0, leadIn: false, policy: '*=reno' }

test('an OPS send decides, switches and moves the file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-node-ops-'))
  try {
    const src = path.join(dir, 'src.bin')
    const dst = path.join(dir, 'dst.bin')
    const data = crypto.randomBytes(2_000_003)
    fs.writeFileSync(src, data)
    const l = boundSocket()
    const received = recvFile(l.fd, dst, { idleS: 20, acceptTimeoutS: 30 })
    const c = await connectPaused(l.port)
    const sent = await sendFile(c._handle.fd, src, { ops: OPS })
    const got = await received
    c.destroy()
    l.h.close()
    assert.deepStrictEqual(fs.readFileSync(dst), data)
    assert.ok(sent.complete && sent.fileIdentical && got.verified)
    assert.deepStrictEqual(sent.ops.decisions.map((d) => d.cca), ['reno'])
    assert.strictEqual(sent.ops.decisions[0].samples, 3)
    assert.deepStrictEqual(sent.ops.ccas, ['cubic', 'reno'])
    assert.strictEqual(sent.driver.stats.decisions, 1)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('aborting the signal stops the send with a verified prefix', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-node-stop-'))
  try {
    const src = path.join(dir, 'src.bin')
    const dst = path.join(dir, 'dst.bin')
    const part = path.join(dir, '.dst.bin.opsel-part')
    const block = crypto.randomBytes(1 << 20)
    const nBlocks = 128
    const fd = fs.openSync(src, 'w')
    for (let i = 0; i < nBlocks; i++) fs.writeSync(fd, block)
    fs.closeSync(fd)
    const l = boundSocket()
    const received = recvFile(l.fd, dst, { idleS: 20, acceptTimeoutS: 30 })
    const c = await connectPaused(l.port)
    const ac = new AbortController()
    // Abort once the receiver holds data (the transfer is then running).
    const timer = setInterval(() => {
      if (fs.existsSync(part) && fs.statSync(part).size >= 1 << 20) {
        clearInterval(timer)
        ac.abort()
      }
    }, 1)
    const sent = await sendFile(c._handle.fd, src, { cca: 'cubic' }, ac.signal)
    clearInterval(timer)
    const got = await received
    c.destroy()
    l.h.close()
    const n = sent.driver.bytesSent
    assert.ok(ac.signal.aborted)
    assert.ok(n >= 1 << 20 && n < nBlocks << 20, `${n}`)
    assert.strictEqual(sent.driver.end, 'stopped')
    assert.ok(!sent.complete && got.verified && !got.complete)
    assert.ok(!fs.existsSync(dst))
    const kept = fs.readFileSync(part)
    assert.strictEqual(kept.length, n)
    for (let off = 0; off < n; off += block.length) {
      const k = Math.min(block.length, n - off)
      assert.ok(kept.subarray(off, off + k).equals(block.subarray(0, k)), `prefix at ${off}`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('bad ops specs and signals are clear errors', async () => {
  for (const [spec, want] of [
    [{ ops: { steadyS: -1 } }, /steady_s/],
    [{ ops: { model: 'no-such-model' } }, /no-such-model/],
    [{ ops: { patern: 'S3' } }, /patern/],
    [{ ops: {}, cca: 'bbr' }, /exclude/]
  ]) {
    const l = boundSocket()
    const received = recvFile(l.fd, path.join(os.tmpdir(), 'opsel-node-never'), { acceptTimeoutS: 1 })
    const c = await connectPaused(l.port)
    // A spec that does not parse throws at the call, a bad value rejects.
    await assert.rejects(async () => sendFile(c._handle.fd, __filename, spec), (e) => {
      assert.match(e.message, want)
      assert.strictEqual(e.code, 'OPSEL_INVALID_INPUT')
      return true
    })
    c.destroy()
    await assert.rejects(received)
    l.h.close()
  }
  assert.throws(() => sendFile(0, __filename, null, {}), /AbortSignal/)
})
