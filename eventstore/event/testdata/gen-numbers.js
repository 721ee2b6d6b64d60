// Regenerates numbers.tsv: `node gen-numbers.js > numbers.tsv` (Node 18+).
// Each line: the IEEE-754 bits of a double in hex, a tab, and Number.prototype.toString() of it.
'use strict'
const buf = Buffer.alloc(8)
const out = []
const emit = f => { buf.writeDoubleBE(f); out.push(buf.toString('hex') + '\t' + String(f)) }
const fixed = [0, -0, 1, -1, 0.1, 0.2, 0.30000000000000004, 1e21, 1e-7, 1e-6, 0.000001, 1.5e300, 123456789012345680000,
  999999999999999900000, 1e20, 1.2345e20, 1.2345e21, 5e-324, -5e-324, 1.7976931348623157e308, 2 ** 53, 2 ** 53 + 2,
  2 ** 53 - 1, 1e15, 1e16, 1e-6 * 1.5, 1.5e-7, 100, 0.5, -0.5, 123.456, 1 / 3, 2 / 3, 4.35, 0.1 + 0.7, 1e100, 1e-100,
  Infinity, -Infinity, NaN, 2 ** -1074, 2 ** 1023, 9007199254740993, 1.0000000000000002, 0.9999999999999999]
for (const f of fixed) emit(f)
// Deterministic pseudo-random doubles: random bit patterns and random decimal magnitudes.
let s = 0x2545F491
const rnd = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s }
for (let i = 0; i < 3000; i++) {
  buf.writeUInt32BE(rnd(), 0); buf.writeUInt32BE(rnd(), 4)
  const f = buf.readDoubleBE(0)
  if (Number.isFinite(f)) emit(f)
}
for (let i = 0; i < 3000; i++) {
  const mant = rnd() / 2 ** 32
  const exp = (rnd() % 60) - 30
  const digits = 1 + rnd() % 17
  emit(Number((mant * 10 ** exp).toPrecision(digits)))
  emit(Math.round(mant * 10 ** (rnd() % 25)))
}
console.log(out.join('\n'))
