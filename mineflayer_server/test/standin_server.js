#!/usr/bin/env node
'use strict'
// A stand-in for an external Minecraft server, for tests of `--server external` from another process:
// the embedded flying-squid with our plugin, which admits the named players from any local client and
// obeys their operator commands, as a vanilla server obeys the players of its ops.json. A sidecar's own
// server admits none of them (src/plugin/admission.js), so tests cannot use one in its place.
//
//   node test/standin_server.js --rules DIR --operators a0_ext_a,a0_ext_b
//
// Prints `READY {"port": P, "floor_y": Y}` on stdout once it listens; exits when stdin closes or on SIGTERM.

const writeStdout = process.stdout.write.bind(process.stdout)
process.stdout.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb)

const { startServer, stopServer } = require('../src/server')
const { loadRules } = require('../src/rules')

function arg (name) {
  const i = process.argv.indexOf(name)
  if (i < 0 || i + 1 >= process.argv.length) throw new Error(`usage: standin_server.js --rules DIR --operators NAME,NAME (missing ${name})`)
  return process.argv[i + 1]
}

async function main () {
  const operators = arg('--operators').split(',').filter(Boolean)
  const log = (scope, message) => process.stderr.write(`[${scope}] ${message}\n`)
  const { serv, port, floorY } = await startServer({ rules: loadRules(arg('--rules')), log, operators })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await stopServer(serv)
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.stdin.on('end', stop)
  process.stdin.on('close', stop)
  writeStdout('READY ' + JSON.stringify({ port, floor_y: floorY }) + '\n')
}

main().catch(err => {
  process.stderr.write(`stand-in server failed to start: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
