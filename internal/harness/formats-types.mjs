// dshfs-types.mjs — print the released-v2 event inventory the installed codec package exports, as one
// JSON array, so tests can hold dshfs's copy of it against the published one.
import { RELEASED_V2_EVENT_TYPES } from '@deepseek-ai/dsh-session-format-v1-to-v2'
process.stdout.write(JSON.stringify(RELEASED_V2_EVENT_TYPES) + '\n')
