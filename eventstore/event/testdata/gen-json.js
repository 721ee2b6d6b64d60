// Regenerates json.tsv: `node gen-json.js > json.tsv` (Node 18+).
// Each line: input bytes (hex), a tab, and JSON.stringify(JSON.parse(Buffer.toString('utf8'))) as hex,
// or ERROR when JSON.parse throws. Decoding goes through Buffer like the harness's scanner.
'use strict'
const cases = [
  '0', '-0', '[-0]', '1', '1.0', '1e3', '1E3', '1e+3', '1e-3', '-1.5e-7', '0.1', '1e21', '1e400', '-1e400', '1e-400',
  '-1e-400', '123456789012345678901234567890', '0.000001', '0.0000001', '9007199254740993', '01', '-', '1.', '.5',
  '+1', '1e', '1e+', 'NaN', 'Infinity', '-01', '00', '0x10', '1_0',
  'true', 'false', 'null', 'tru', 'nul', 'True', '', ' ', '\t1\n', '\r\n1\r\n', '\v1', '\f1', '\u00a01',
  '"\ufeff"', '\ufeff1', '\ufeff{}',
  '""', '"a"', '"\\u0041"', '"\\/"', '"\\b\\f\\n\\r\\t"', '"\\u0000\\u001f\\u007f"', '"\\u00e9"', '"é"',
  '"\\u2028\\u2029"', '"<>&"', '"\\ud800"', '"\\udc00"', '"\\ud83d\\ude00"', '"\\uD83D\\uDE00"', '"\\ud83d"',
  '"\\ud83d\\u0041"', '"\\ude00\\ud83d"', '"\\ud800\\ud800\\udc00"', '"\\u12"', '"\\x41"', '"\\a"', '"\t"',
  '"\n"', '"abc', '"\\"', '"\\u004G"', '"😀"',
  '[]', '{}', '[1,2,3]', '[1,]', '[,1]', '[1 2]', '{"a":1,}', '{"a"}', '{"a":}', '{a:1}', "{'a':1}",
  '{"a":1,"a":2}', '{"a":1,"b":2,"a":3}', '{"b":1,"a":2,"1":3,"0":4}', '{"10":1,"9":2,"01":3,"-1":4,"1.5":5}',
  '{"4294967294":1,"4294967295":2,"4294967296":3,"0":4}', '{"__proto__":1}', '{"a":{"b":[1,{"c":null}]}}',
  '{ "a" : [ 1 , 2 ] }', '[1]x', '[1] ', '{"":1}', '{"\\u0030":1,"a":2}', '{"b":1,"0":2,"b":3}',
  '{"\\ud800":1}', '[[[[[[[[[[]]]]]]]]]]', '{"a":1e21,"b":-0.0,"c":1.50}', '"\\u0041\\u0042"',
]
const byteCases = [
  'e28241', '22e2824122', '22ff22', '22c022', '22c0af22', '22e0808022', '22eda08022', '22f090808022',
  '22f4908080ff22', '22f0908022', '22f09f988022', '22c3a922', '22e2822222', '22f09f9822', '2280bf22',
  '22efbfbd22', '22f8888080808022', '5b22e2808022225d', '7b22ed9fbf223a317d',
]
const out = []
const emit = buf => {
  let res
  try { res = Buffer.from(JSON.stringify(JSON.parse(buf.toString('utf8'))), 'utf8').toString('hex') } catch { res = 'ERROR' }
  // JSON.stringify output is a JS string; lone surrogates in it are escaped, so utf8 encoding is exact.
  out.push(buf.toString('hex') + '\t' + res)
}
for (const c of cases) emit(Buffer.from(c, 'utf8'))
for (const h of byteCases) emit(Buffer.from(h, 'hex'))
console.log(out.join('\n'))
