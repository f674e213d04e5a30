// Binding-overhead bench, Node side: the same loop as
// ffi/examples/bench_core.rs through Model.classify(Float64Array).
//   node bench/classify.js DIR [ROUNDS]   (DIR from bench_core)
// Prints "RESULT lang=node median_ns=... checksum=..." (checksum must equal
// the core's). Driven by benches/bindings/run.sh (`make bench-bindings`).
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const opsel = require('..')

const dir = process.argv[2]
const rounds = Number(process.argv[3] || 30)
if (!dir) {
  console.error('usage: node bench/classify.js DIR [ROUNDS]')
  process.exit(2)
}
const QUERIES = 200
const model = opsel.loadModel(path.join(dir, 'model.json'))
const w = model.window
const buf = fs.readFileSync(path.join(dir, 'queries.f64'))
// Copy into an aligned Float64Array, then take zero-copy views per query.
const all = new Float64Array(new Uint8Array(buf).buffer)
const queries = Array.from({ length: QUERIES }, (_, i) => all.subarray(i * w, (i + 1) * w))

let checksum = 0n
queries.forEach((q, i) => {
  const p = model.classify(q)
  checksum += BigInt(i + 1) * BigInt(p.classIndex * 100000 + p.neighbor)
})
// Median per-call time over `rounds` rounds of reps x 200 calls (+1 warm-up).
function time (config, m, reps, sum) {
  const perCall = []
  for (let r = 0; r <= rounds; r++) {
    const t = process.hrtime.bigint()
    for (let k = 0; k < reps; k++) {
      for (let i = 0; i < QUERIES; i++) m.classify(queries[i])
    }
    perCall.push(Number(process.hrtime.bigint() - t) / (QUERIES * reps))
  }
  perCall.shift() // warm-up round
  perCall.sort((a, b) => a - b)
  console.log(`RESULT lang=node config=${config} median_ns=${perCall[rounds >> 1].toFixed(1)} rounds=${rounds} checksum=${sum}`)
}
time('A', model, 1, checksum)
// One-reference model: the fixed cost of a call (see bench_core.rs).
time('tiny', opsel.loadModel(path.join(dir, 'tiny.json')), 50, 0)
