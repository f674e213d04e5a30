// opsel Node example: fit a DTW K-NN classifier (KnnDtw) on labelled RTT
// windows, predict, save the model file and load it back.
//
//   node examples/node/fit_predict.js
'use strict'
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const opsel = require('../../bindings/node')

const W = 20
// Toy training set: an idle path near 65 ms and a path with a standing queue
// near 130 ms, with a small deterministic wiggle.
function window (base, phase) {
  return Array.from({ length: W }, (_, i) => base + 2 * Math.sin(0.7 * i + phase))
}
const rows = []
const labels = []
for (let j = 0; j < 5; j++) {
  rows.push(window(65, j)); labels.push('B0-C0')
  rows.push(window(130, j)); labels.push('B1-B1')
}
const x = Float64Array.from(rows.flat())

const clf = new opsel.KnnDtw({ k: 1, radius: 10, cost: 'abs' })
clf.fit(x, W, labels)
const queries = Float64Array.from([...window(66, 9), ...window(128, 3)])
console.log('classes:', clf.classes.join(' '), '| predict:', clf.predict(queries).join(' '))

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-example-'))
try {
  const file = path.join(dir, 'toy.model.json')
  clf.save(file)
  const model = opsel.loadModel(file)
  console.log(`saved and reloaded: window ${model.window}, config ${JSON.stringify(model.config)}`)
  console.log('reloaded predicts:', model.classify(queries.subarray(0, W)).class)
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
