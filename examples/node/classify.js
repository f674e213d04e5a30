// opsel Node example: load a background-mix model and classify RTT windows,
// one at a time (Model.classify) and as a batch off the event loop
// (Model.classifyBatch). Errors are Error objects with a `code`.
//
//   node examples/node/classify.js tests/fixtures/knn_golden.model.json
'use strict'
const opsel = require('../../bindings/node')

async function main () {
  const modelPath = process.argv[2]
  if (!modelPath) {
    console.error('usage: node classify.js MODEL.json')
    process.exit(2)
  }
  const model = opsel.loadModel(modelPath)
  const w = model.window
  console.log(`opsel ${opsel.version()}: ${model.classes.length} classes (${model.classes.join(' ')}), ` +
    `${model.referenceCount} references, window ${w}`)

  // Two made-up windows: an idle path at the 65 ms base RTT, and a CUBIC-like
  // sawtooth riding a full buffer (000 Fig 5.3).
  const flat = Float64Array.from({ length: w }, (_, i) => 65 + 0.3 * (i % 3))
  const saw = Float64Array.from({ length: w }, (_, i) => 65 + 58.5 + 39 * (i % 12) / 12)
  for (const [label, win] of [['flat', flat], ['sawtooth', saw]]) {
    const p = model.classify(win)
    console.log(`${label.padEnd(9)} -> ${p.class.padEnd(6)} distance ${p.distance.toFixed(3)} ` +
      `(reference ${p.neighbor}, ${p.votes} votes, confidence ${p.confidence.toFixed(2)})`)
  }

  // A batch runs on the libuv thread pool; the event loop stays free.
  const batch = new Float64Array(2 * w)
  batch.set(flat, 0)
  batch.set(saw, w)
  const ps = await model.classifyBatch(batch)
  console.log('batch     ->', ps.map((p) => p.class).join(', '))

  // Bad input: a coded Error, never a crash.
  try {
    model.classify(new Float64Array(w - 1))
  } catch (e) {
    console.log(`error     -> ${e.code}: ${e.message}`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
