// OpsDriver with a JS policy function ("user policies (... a
// callback in Python/Node ...)"; "Node runs it off the event loop"). The
// driver runs on a libuv worker; at each decision it hands the
// classification to the policy on the JS thread through a threadsafe
// function and waits for the answer (at most policyTimeoutS).
//
// Loopback net.Socket pair, UDP echo responder with a 20 ms delay line, the
// tiny w = 3 model tests/fixtures/ops_driver_tiny.model.json and the pattern
// X:1-silence:1-cubic:1 (X = bbr when this process may set it, else reno):
// the probe ends on cubic, so a policy answering X makes the decision switch
// the live socket to X, which is read back. Also: a throwing policy, a
// non-string and an unknown CCA, a JS thread blocked past the timeout; each
// rejects with a coded error naming the cause, with the bytes sent so far,
// and leaves the socket open on the last decided CCA. And env teardown: a
// worker_threads Worker terminated while its driver waits for a policy
// answer (its JS thread blocked) frees the libuv pool thread at once, not
// after policyTimeoutS (this file re-runs itself as that child process).
// Bounded: ~25 s.
'use strict'
const { Worker, isMainThread, parentPort } = require('node:worker_threads')
const { execFileSync } = require('node:child_process')
// Set in the teardown child process and its worker (see teardownChild).
const MODE = process.env.OPSEL_POLICY_TEARDOWN
const test = MODE ? () => {} : require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const net = require('node:net')
const path = require('node:path')
const opsel = require('..')
const { tcpPair, closePair, until } = require('./support/loopback')

const TINY = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures', 'ops_driver_tiny.model.json')
// The tiny model was probed with cubic:1-silence:1-bbr:1; these tests drive the
// driver with other short patterns and passive probing, so the model/pattern
// check (tested in ops.test.js) is off.
const NO_CHECK = { checkModel: false }
const SHAPE = ['label', 'classIndex', 'confidence', 'distance', 'bbrPresent', 'heterogeneous', 'bbrFlows', 'totalFlows']

function xCca () {
  const root = typeof process.getuid === 'function' && process.getuid() === 0
  return opsel.availableCcas().includes('bbr') && (root || opsel.allowedCcas().includes('bbr')) ? 'bbr' : 'reno'
}


// One OPS cycle: X:1-silence:1-cubic:1, then the policy's decision.
function driver (echo, policy, drv = {}) {
  return new opsel.OpsDriver(
    TINY,
    { ...NO_CHECK, mode: 'active', pattern: `${xCca()}:1-silence:1-cubic:1`, steadyS: 100, policy },
    { probe: `127.0.0.1:${echo.port}`, leadIn: false, intervalS: 0.25, ...drv }
  )
}

// A policy run that must fail: the rejection, checked for what every
// failure carries (code, bytes, report, socket left on cubic, open).
async function failing (policy, drv = {}) {
  const s = await tcpPair()
  const echo = new opsel.UdpEchoResponder('127.0.0.1:0', 20)
  try {
    return await checkFailing(s, echo, policy, drv)
  } finally {
    echo.stop()
    closePair(s)
  }
}

async function checkFailing (s, echo, policy, drv) {
  const d = driver(echo, policy, { timeLimitS: 10, ...drv })
  const fd = s.client._handle.fd
  const t0 = Date.now()
  let err
  await d.run(fd, '/dev/zero').then(() => assert.fail('the run should reject'), (e) => { err = e })
  const took = (Date.now() - t0) / 1000
  assert.ok(err instanceof Error, String(err))
  assert.equal(err.code, 'OPSEL_INVALID_INPUT')
  assert.match(err.message, /^OpsDriver policy function /)
  assert.match(err.message, /for class (B0-C0|B0-C1|B1-C0|B1-C1|B1-B1|C1-C1)/)
  assert.match(err.message, new RegExp(`the driver stopped after ${err.bytesSent} bytes \\(the socket is open, holds cubic`))
  // Stopped at the first (failed) decision, ~2 s in (third 1 Hz sample),
  // not at the 10 s limit.
  assert.ok(took > 1.5 && took < 8, `the run took ${took} s`)
  assert.equal(err.report.end, 'stopped')
  assert.equal(err.report.bytesSent, err.bytesSent)
  assert.equal(err.report.stats.decisions, 0)
  assert.equal(err.report.stats.failedDecisions, 1)
  const failed = err.report.events.filter((e) => e.kind === 'decisionFailed')
  assert.equal(failed.length, 1)
  assert.ok(failed[0].message.includes(err.message.split('; the driver stopped')[0]), failed[0].message)
  // Nothing lost: every byte reported as sent arrives, and the socket still
  // works and holds the last decided CCA (the initial cubic).
  assert.ok(err.bytesSent > 0)
  await until(() => s.received === err.bytesSent)
  assert.equal(s.received, err.bytesSent)
  assert.equal(opsel.getCca(fd), 'cubic')
  const more = await opsel.sendFixed(fd, Buffer.alloc(1000, 1), 'cubic')
  assert.equal(more.bytesSent, 1000)
  await until(() => s.received === err.bytesSent + 1000)
  assert.equal(s.received, err.bytesSent + 1000)
  return err
}

test('a JS policy decides on the live socket; same argument as the Controller', async () => {
  const s = await tcpPair()
  const echo = new opsel.UdpEchoResponder('127.0.0.1:0', 20)
  try {
    await decides(s, echo)
  } finally {
    echo.stop()
    closePair(s)
  }
})

async function decides (s, echo) {
  const x = xCca()
  const calls = []
  const heard = []
  const drv = driver(echo, (c) => {
    calls.push({ c, selectedSoFar: heard.filter((e) => e.kind === 'selected').length })
    return x
  }, { timeLimitS: 4.5 })
  let ticks = 0
  const timer = setInterval(() => ticks++, 10)
  const fd = s.client._handle.fd
  const rep = await drv.run(fd, '/dev/zero', (e) => heard.push(e))
  clearInterval(timer)
  assert.equal(rep.end, 'timeLimit')
  assert.ok(ticks > 100, `the event loop ran ${ticks} ticks during the 4.5 s run`)
  // One decision, by the policy, before its "selected" event was emitted.
  assert.equal(calls.length, 1)
  assert.equal(calls[0].selectedSoFar, 0)
  assert.equal(rep.stats.decisions, 1)
  assert.equal(rep.stats.failedDecisions, 0)
  const arg = calls[0].c
  // The fields, in any order (the object is the core's PolicyInput in its Node form).
  assert.deepEqual(Object.keys(arg).sort(), [...SHAPE].sort())
  assert.ok(drv.classes.includes(arg.label))
  assert.equal(drv.classes[arg.classIndex], arg.label)
  assert.ok(arg.confidence >= 0 && arg.confidence <= 1)
  assert.ok(Number.isFinite(arg.distance))
  // The live socket was switched to the policy's answer and reads back so.
  assert.equal(opsel.getCca(fd), x)
  const ev = rep.events
  await until(() => heard.length === ev.length)
  assert.deepEqual(heard, ev)
  const kinds = ev.filter((e) => ['phase', 'classified', 'selected', 'decision'].includes(e.kind))
    .map((e) => e.kind === 'phase' ? e.phase : e.kind)
  assert.deepEqual(kinds, ['probe', 'classify', 'classified', 'select', 'selected', 'steady', 'decision'])
  const cls = ev.find((e) => e.kind === 'classified')
  assert.equal(cls.label, arg.label)
  assert.equal(cls.confidence, arg.confidence)
  assert.equal(ev.find((e) => e.kind === 'selected').cca, x)
  const dec = ev.find((e) => e.kind === 'decision')
  assert.equal(dec.cca, x)
  assert.equal(dec.switched, true)
  // The decision's latency includes the round trip to the JS thread.
  assert.ok(dec.latencyNs > 0 && dec.latencyNs < 1e9, `${dec.latencyNs} ns`)
  // The probe's segments, then the decision's switch (the one set that
  // measures latency from the last RTT sample).
  const sets = ev.filter((e) => e.kind === 'ccaSet')
  assert.deepEqual(sets.slice(-3).map((e) => e.cca), [x, 'cubic', x])
  assert.equal(rep.ccaSets, sets.length)
  assert.ok(sets[sets.length - 1].latencyNs > 0)
  assert.ok(ev.indexOf(sets[sets.length - 1]) > ev.indexOf(ev.find((e) => e.kind === 'selected')))
  // Bytes: what the receiver got is what the report says was sent.
  await until(() => s.received === rep.bytesSent)
  assert.equal(s.received, rep.bytesSent)
  assert.ok(rep.bytesSent > 1e6)
  const iv = ev.filter((e) => e.kind === 'interval')
  assert.equal(iv.reduce((a, e) => a + e.bytes, 0), iv[iv.length - 1].totalBytes)

  // The Controller's policy function gets an argument of the same shape.
  let ctlArg
  const ctl = new opsel.Controller(TINY, { ...NO_CHECK, steadyS: 10, policy: (c) => { ctlArg = c; return 'cubic' } })
  ctl.start(0)
  for (let k = 1; k <= 10 && !ctlArg; k++) {
    ctl.handleTimeout(k * 1e9)
    ctl.handleSample(k * 1e9, 20 + (k % 3))
  }
  assert.ok(ctlArg, 'the Controller called its policy')
  assert.deepEqual(Object.keys(ctlArg), Object.keys(arg))
  for (const k of SHAPE) assert.equal(typeof ctlArg[k], typeof arg[k], k)
}

test('a throwing policy stops the driver; the error chains the exception', async () => {
  const boom = new Error('boom: no decision today')
  const err = await failing(() => { throw boom })
  assert.match(err.message, /policy function threw Error: boom: no decision today for class/)
  assert.equal(err.cause, boom)
})

test('a policy answering a non-string or an unknown CCA stops the driver', async () => {
  const [num, promise, unknown] = await Promise.all([
    failing(() => 42), failing(async () => 'cubic'), failing(() => 'nosuchcca')
  ])
  assert.match(num.message, /returned a number \(42\) for class \S+; it must return a CCA name/)
  assert.equal(num.cause, undefined)
  assert.match(promise.message, /returned a Promise \(an async function\? the policy must return the CCA name synchronously\)/)
  assert.match(unknown.message, /returned "nosuchcca" for class \S+, which this socket cannot use: .*nosuchcca/)
  assert.equal(unknown.cause, undefined)
})

test('a JS thread blocked past policyTimeoutS: the driver gives up, the loop recovers', async () => {
  let called = 0
  // The main thread is blocked from 1 s to 5.5 s: the decision (~2 s) cannot
  // run the policy; after policyTimeoutS = 1 the worker stops the driver.
  const busy = setTimeout(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 4500), 1000)
  const err = await failing(() => { called++; return 'cubic' }, { policyTimeoutS: 1 })
  clearTimeout(busy)
  assert.match(err.message, /policy function did not answer within 1 s \(policyTimeoutS\) for class \S+: the JS thread is blocked or busy/)
  // The late call still reached the policy once the thread was free; its
  // answer went nowhere.
  assert.equal(called, 1)
})

// In the child process (OPSEL_POLICY_TEARDOWN=1, UV_THREADPOOL_SIZE=1):
// the worker runs a driver whose policy can never be answered (its JS thread
// blocks in Atomics.wait from 1 s; the decision comes at ~2 s; policyTimeoutS
// is 60). The main thread terminates the worker at ~3.5 s, then times a
// threadpool job: with one pool thread it runs only once the driver's
// run() has returned, i.e. once the worker saw the threadsafe function close.
function teardownChild () {
  const w = new Worker(__filename, { env: { OPSEL_POLICY_TEARDOWN: 'worker' } })
  w.on('message', async () => {
    await new Promise((resolve) => setTimeout(resolve, 2500))
    const t0 = Date.now()
    await w.terminate()
    const terminateS = (Date.now() - t0) / 1000
    const t1 = Date.now()
    crypto.pbkdf2('x', 'y', 1, 16, 'sha256', () => {
      console.log(JSON.stringify({ terminateS, poolJobS: (Date.now() - t1) / 1000 }))
    })
  })
}

function teardownWorker () {
  const server = net.createServer((peer) => peer.on('data', () => {}))
  server.listen(0, '127.0.0.1', () => {
    const client = net.connect(server.address().port, '127.0.0.1', () => {
      const echo = new opsel.UdpEchoResponder('127.0.0.1:0', 20)
      const d = driver(echo, () => 'cubic', { timeLimitS: 20, policyTimeoutS: 60 })
      d.run(client._handle.fd, '/dev/zero').catch(() => {})
      setTimeout(() => {
        parentPort.postMessage('blocking')
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000)
      }, 1000)
    })
  })
}

test('env teardown while a policy call is pending does not hang the worker', () => {
  const out = execFileSync(process.execPath, [__filename], {
    env: { ...process.env, OPSEL_POLICY_TEARDOWN: 'child', UV_THREADPOOL_SIZE: '1' },
    timeout: 30000,
    encoding: 'utf8'
  })
  const r = JSON.parse(out.trim().split('\n').pop())
  assert.ok(r.terminateS < 5, `terminate() took ${r.terminateS} s`)
  // Without the closed-function check the pool thread would wait 60 s.
  assert.ok(r.poolJobS < 5, `the threadpool was busy for ${r.poolJobS} s after terminate()`)
})

test('an idle driver with a policy function does not keep Node alive', () => {
  // If it did, this file's process would never exit and node --test would hang.
  const d = new opsel.OpsDriver(TINY, { ...NO_CHECK, policy: () => 'cubic' }, { probe: '127.0.0.1:9' })
  assert.deepEqual(d.classes.length, 6)
})

if (MODE === 'child') teardownChild()
else if (MODE === 'worker' && !isMainThread) teardownWorker()
