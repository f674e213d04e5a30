// opsel TypeScript example: the types of the Node package at work. Fit a DTW
// K-NN classifier on labelled RTT windows, classify off the event loop, and
// handle opsel's typed errors. `make test-packaging` type-checks it with
// `tsc --noEmit --strict` against the installed npm package.
//
//   npm install ./opsel-<version>.tgz typescript @types/node
//   npx tsc --strict --module commonjs --target es2020 fit_predict.ts && node fit_predict.js
import { KnnDtw, loadModel, type Model, type Prediction } from 'opsel'

const W = 20

function window (base: number, phase: number): number[] {
  return Array.from({ length: W }, (_, i) => base + 2 * Math.sin(0.7 * i + phase))
}

async function main (): Promise<void> {
  const rows: number[][] = []
  const labels: string[] = []
  for (let j = 0; j < 5; j++) {
    rows.push(window(65, j)); labels.push('B0-C0')
    rows.push(window(130, j)); labels.push('B1-B1')
  }
  const clf = new KnnDtw({ k: 1, radius: 10, cost: 'abs' })
  clf.fit(Float64Array.from(rows.flat()), W, labels)

  const queries = Float64Array.from([...window(66, 9), ...window(128, 3)])
  const predicted: string[] = clf.predict(queries)
  console.log('predict:', predicted.join(' '))

  const model: Model = clf.toModel()
  const batch: Prediction[] = await model.classifyBatch(queries)
  for (const p of batch) console.log(`${p.class} (distance ${p.distance.toFixed(1)})`)

  try {
    loadModel('/nonexistent/model.json')
  } catch (e) {
    // opsel errors carry the C API's status name in `code`.
    const code = (e as NodeJS.ErrnoException).code
    console.log('loadModel on a missing file:', code)
  }
}

main().catch((e: unknown) => { console.error(e); process.exit(1) })
