// AlphaIdentifier, QosPlan and DecisionCache: document 003 through thin
// conversions into opsel::flows, checked against hand-worked values of
// eq 3.1 (alpha report >= H corrected bytes), eq 3.2 (alpha-bytes sum) and
// eq 3.3 (alpha-time is the union of the alpha-intervals).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { AlphaIdentifier, QosPlan, DecisionCache, readNfcapd } = require('..')

const S = 1e9
const rec = (src, dst, sampledBytes, firstS, lastS, srcPort = 40000) => ({
  srcAddr: src, dstAddr: dst, srcPort, dstPort: 2811, proto: 6, bytes: sampledBytes,
  packets: Math.max(1, Math.floor(sampledBytes / 1500)), firstNs: firstS * S, lastNs: lastS * S, samplingInterval: 1000
})

test('alpha reports, bytes and time as 003 defines them', () => {
  const id = new AlphaIdentifier()
  assert.equal(id.push(rec('10.1.2.3', '10.9.9.9', 1500000, 0, 60)), true)
  assert.equal(id.push(rec('10.1.2.77', '10.9.9.1', 2000000, 30, 90, 40001)), true)
  assert.equal(id.push(rec('10.1.2.3', '10.9.9.9', 500000, 100, 200, 40002)), false)
  const [d0] = id.finish()
  assert.equal(d0.alphaReports, 2)
  const [pf] = d0.prefixFlows
  assert.deepEqual(pf.id, { src: '10.1.2.0/24', dst: '10.9.9.0/24' })
  assert.equal(pf.alphaBytes, 3.5e9)
  assert.equal(pf.alphaTimeNs, 90 * S)
  assert.throws(() => id.push(rec('10.1.2.3', '10.9.9.9', 1, 0, 1)), /finish/)
  assert.throws(() => new AlphaIdentifier({ prefixLenV4: 40 }), { code: 'OPSEL_INVALID_INPUT' })
  assert.throws(() => new AlphaIdentifier().push({ srcAddr: 'x' }), { code: 'OPSEL_INVALID_INPUT' })
})

test('the QoS plan has one u32 filter per prefix ID', () => {
  const plan = new QosPlan(['10.1.2.0/24 -> 10.9.9.0/24', '192.0.2.0/24 198.51.100.0/24'], 'default', 1e8)
  assert.equal(plan.toObject().defaultClass, '1:20')
  const cmds = plan.commands('eth0', 'lab')
  assert.ok(cmds.every((c) => c[0] === '-n' && c[1] === 'lab'))
  assert.equal(cmds.filter((c) => c.includes('u32')).length, 2)
  const low = new QosPlan(['10.1.2.0/24 -> 10.9.9.0/24'], { linkRateBps: 1e9, alphaShare: 0.8 })
  assert.ok(low.notes.some((n) => n.includes('30')))
  assert.throws(() => new QosPlan([], 'fast'), /preset/)
})

test('the decision cache ages, saves and refuses damaged files', () => {
  const c = new DecisionCache()
  c.record('10.1.2.3', 'B1-C1', 'bbr', 0.9, 1000)
  assert.deepEqual(c.lookup('10.1.2.200', 4600), { prefix: '10.1.2.0/24', label: 'B1-C1', cca: 'bbr', confidence: 0.9, atS: 1000, ageS: 3600 })
  assert.equal(c.lookup('10.1.2.3', 1000 + 30 * 86400), null)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-dcache-'))
  const file = path.join(dir, 'cache.json')
  c.save(file, 2000)
  assert.equal(DecisionCache.load(file).size, 1)
  fs.writeFileSync(file, '{broken')
  assert.throws(() => DecisionCache.load(file), /left as it is/)
  assert.equal(fs.readFileSync(file, 'utf8'), '{broken')
  fs.rmSync(dir, { recursive: true })
  assert.throws(() => c.record('10.1.2.3', 'B1-C1', 'bbr', 1.5, 0), { code: 'OPSEL_INVALID_INPUT' })
})

test('readNfcapd reads a file nfcapd wrote as nfdump reads it', () => {
  // tests/fixtures/flows/README.md: the real nfcapd wrote it; the JSON is nfdump's own reading.
  const dir = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures', 'flows')
  const recs = readNfcapd(path.join(dir, 'nfcapd.sample'))
  const want = JSON.parse(fs.readFileSync(path.join(dir, 'nfcapd.sample.nfdump.json'), 'utf8')).records
  assert.deepEqual(
    recs.map((r) => ({
      src_addr: r.srcAddr, dst_addr: r.dstAddr, src_port: r.srcPort, dst_port: r.dstPort,
      proto: r.proto, packets: r.packets, bytes: r.bytes,
    })),
    want,
  )
  const ident = new AlphaIdentifier()
  for (const r of recs) ident.push(r)
  const bad = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'opsel-nf-')), 'bad')
  fs.writeFileSync(bad, Buffer.alloc(64))
  assert.throws(() => readNfcapd(bad), (e) => e.code === 'OPSEL_INVALID_INPUT' && /not an nfdump file/.test(e.message))
  assert.throws(() => readNfcapd(bad + '-missing'), (e) => /missing/.test(e.message))
})
