// surface-bench.mjs ROOT ID [REPS] — the harness half of bench/surface.sh. Loads session ID once with the
// harness's own JSONL provider (inspect(), as inspect.mjs does), then times REPS (default 5) in-process
// repetitions, after one untimed warm-up, of exactly what the harness runs to get a session's messages:
//   foldSurface(events)                                  (the full-log fold)
//   Session.create(SessionId(id), events, meta)          (seed validation + snapshot + incremental fold)
//   session.deriveMessages()
// Session.create snapshots its borrowed seed itself, so the loaded events are passed as they are.
// Prints one JSON line: {events, nodes, messages, reps, foldNs, createNs, deriveNs, totalNs} with the median
// of each phase and of their per-repetition sum (totalNs), in nanoseconds. Run it with the pinned Node 22
// from the interop cache (bench/surface.sh copies it there, next to node_modules).
import { readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
const { Context } = await import('@deepseek-ai/cordis')
const { default: SessionStore, Session, SessionId, foldSurface } = await import('@deepseek-ai/dsh-session')
const { default: JsonlSessionPersistence } = await import('@deepseek-ai/dsh-session-persistence-jsonl')
const [rootArg, id, repsArg = '5'] = process.argv.slice(2)
const reps = Number.parseInt(repsArg, 10)
if (!rootArg || !id || !(reps > 0)) {
  console.error('usage: surface-bench.mjs ROOT ID [REPS]')
  process.exit(2)
}
const root = resolve(rootArg)
function detect(dir, depth = 0) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (name.endsWith('.jsonl.zstd')) return 'zstd'
    if (name.endsWith('.jsonl')) return 'none'
    if (depth < 3 && statSync(p).isDirectory()) { const d = detect(p, depth + 1); if (d) return d }
  }
  return undefined
}
const ctx = new Context(); await ctx.plugin(SessionStore)
const fiber = await ctx.plugin(JsonlSessionPersistence, { root, compression: detect(root) ?? 'zstd' })
const { events, meta } = await ctx.sessionPersistence.inspect(id)
await fiber.dispose()

const now = () => process.hrtime.bigint()
function once() {
  const t0 = now()
  const fold = foldSurface(events)
  const t1 = now()
  const session = Session.create(SessionId(id), events, meta)
  const t2 = now()
  const messages = session.deriveMessages()
  const t3 = now()
  return { fold: t1 - t0, create: t2 - t1, derive: t3 - t2, nodes: fold.nodes.length, messages: messages.length }
}
const median = (xs) => [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[Math.floor((xs.length - 1) / 2)]
const first = once() // warm-up: lets the JIT see the code before anything is timed
const runs = []
for (let i = 0; i < reps; i++) runs.push(once())
console.log(JSON.stringify({
  events: events.length,
  nodes: first.nodes,
  messages: first.messages,
  reps,
  foldNs: Number(median(runs.map((r) => r.fold))),
  createNs: Number(median(runs.map((r) => r.create))),
  deriveNs: Number(median(runs.map((r) => r.derive))),
  totalNs: Number(median(runs.map((r) => r.fold + r.create + r.derive))),
}))
