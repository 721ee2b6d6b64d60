// dump.mjs ROOT ID... — open a JSONL store with the harness's own published provider and print, per id, one
// JSON line {id, header, stored, storedError, events, error}: header = JSON.stringify(inspect().meta), stored =
// readFrom(id, 0) events and events = inspect() events, each as its JSON.stringify line; storedError and
// error are the messages readFrom and inspect refused with. `dump.mjs ROOT --load ID...` instead runs the
// harness's load() (the durable crash repair) on each id and prints {id, error}. One Node process serves every id, so
// interop tests over hundreds of sessions stay fast. `dump.mjs ROOT --invariant ID...` runs the compaction
// package's invariant companion (@deepseek-ai/dsh-compaction/invariant) over each id's inspect() events, as
// it checks a session it is installed on, and prints {id, error}. Compression is taken from the files in ROOT.
import { readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
const { Context } = await import('@deepseek-ai/cordis')
const { default: SessionStore } = await import('@deepseek-ai/dsh-session')
const { default: JsonlSessionPersistence } = await import('@deepseek-ai/dsh-session-persistence-jsonl')
const [rootArg, ...ids] = process.argv.slice(2)
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
const compression = detect(root) ?? 'zstd'
const ctx = new Context(); await ctx.plugin(SessionStore)
const fiber = await ctx.plugin(JsonlSessionPersistence, { root, compression })
const p = ctx.sessionPersistence
if (ids[0] === '--load') {
  // load(): the harness's durable crash repair (torn tail cut, closers appended), then nothing else
  for (const id of ids.slice(1)) {
    try { await p.load(id); console.log(JSON.stringify({ id })) } catch (err) { console.log(JSON.stringify({ id, error: String(err?.message ?? err) })) }
  }
} else if (ids[0] === '--invariant') {
  // The companion registers with the invariants service and seeds every listed session: a stand-in service
  // hands it one session and turns its failure callback into an exception.
  const invariant = await import('@deepseek-ai/dsh-compaction/invariant')
  for (const id of ids.slice(1)) {
    const out = { id }
    try {
      const session = { events: (await p.inspect(id)).events }
      const sessions = { list: () => [session] }
      const fail = (message) => { throw new Error(message) }
      await invariant.apply({ invariants: { register: (_name, install) => install({ sessions, on: () => {} }, fail) } })
    } catch (err) {
      out.error = String(err?.message ?? err)
    }
    console.log(JSON.stringify(out))
  }
} else if (ids.length === 1 && ids[0] === '--list') {
  for (const h of await p.list()) console.log(JSON.stringify(h))
} else {
  for (const id of ids) {
    const out = { id }
    try {
      out.stored = (await p.readFrom(id, 0)).events.map(e => JSON.stringify(e))
    } catch (err) {
      out.storedError = String(err?.message ?? err)
    }
    try {
      const ins = await p.inspect(id)
      out.header = JSON.stringify(ins.meta)
      out.events = ins.events.map(e => JSON.stringify(e))
    } catch (err) {
      out.error = String(err?.message ?? err)
    }
    console.log(JSON.stringify(out))
  }
}
await fiber.dispose()
