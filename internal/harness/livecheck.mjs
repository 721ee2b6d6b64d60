// livecheck.mjs CASES.json --modules DIR — appends each case's events, in order, to a fresh session of
// the harness's own session store with its session and compaction invariant companions loaded, and
// prints one JSON line per case: {"appended": N} when every event was appended, else
// {"appended": N, "error": "<message>"} for the first append that threw (N events before it).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
const args = process.argv.slice(2); const mi = args.indexOf('--modules')
const MODULES = resolve(args.splice(mi, 2)[1])
const req = createRequire(join(dirname(MODULES), 'resolver.cjs'))
const imp = spec => import(pathToFileURL(req.resolve(spec)).href)
const { Context } = await imp('@deepseek-ai/cordis')
const { default: InvariantRegistry } = await imp('@deepseek-ai/dsh-invariants')
const { default: SessionStore, SessionId } = await imp('@deepseek-ai/dsh-session')
const sessionInvariant = await imp('@deepseek-ai/dsh-session/invariant')
const compactionInvariant = await imp('@deepseek-ai/dsh-compaction/invariant')
const ctx = new Context()
await ctx.plugin(InvariantRegistry)
await ctx.plugin(SessionStore)
await ctx.plugin(sessionInvariant)
await ctx.plugin(compactionInvariant)
const cases = JSON.parse(readFileSync(args[0], 'utf8'))
let n = 0
for (const events of cases) {
  const s = ctx.sessions.create(SessionId(`case-${n++}`), { meta: { cwd: '/srv/live' } })
  let appended = 0; let error
  for (const e of events) {
    const opts = {}
    if (e.surfaceOp !== undefined) opts.surfaceOp = e.surfaceOp
    if (e.sourceEventSeqs !== undefined) opts.sourceEventSeqs = e.sourceEventSeqs
    try { s.append(e.type, e.data, opts) } catch (err) { error = err?.message ?? String(err); break }
    appended++
  }
  console.log(JSON.stringify(error === undefined ? { appended } : { appended, error }))
}
