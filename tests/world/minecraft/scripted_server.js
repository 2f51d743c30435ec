#!/usr/bin/env node
'use strict'
// A Minecraft server that misbehaves on purpose, for the driver's contract tests: each behaviour is one
// way a server the bots are pointed at (`server="external"`) can fail them.
//
//   node scripted_server.js --behaviour B [--sidecar DIR --rules DIR --operators a,b] [--reason TEXT]
//                           [--version-name 1.20.4 --version-protocol 765] [--status answer|close]
//
//   refuse-login      answers the status ping as 1.21.4, then refuses every login with --reason
//   kick-mid-episode  a real game (the sidecar's flying-squid, admitting --operators as operators, as a vanilla
//                     server admits the players of its ops.json); on stdin `kick` it kicks every player with
//                     --reason, on `refuse [NAME]` it refuses every later login (of NAME) with --reason, on
//                     `admit` it admits again, on `delay S` it answers every later login it admits S s late
//   slow              answers the status ping as 1.21.4, takes logins and never lets a player spawn
//   wrong-version     speaks another version: the status ping names --version-name/--version-protocol (or, with
//                     --status close, closes the connection as a server with enable-status=false does) and every
//                     login is refused as a vanilla server of that version refuses a newer client
//   silent            accepts TCP connections and never says a word
//
// The sidecar's Node packages are found through NODE_PATH, as the sidecar finds them. Prints
// `READY {"port": P}` on stdout once it listens, then one line per stdin command done (`KICKED {...}`,
// `REFUSING`, `ADMITTING`, `DELAYING`); exits when stdin closes or on SIGTERM.

const net = require('net')
const path = require('path')

const BEHAVIOURS = ['refuse-login', 'kick-mid-episode', 'slow', 'wrong-version', 'silent']
const VERSION = '1.21.4'

function option (name, fallback) {
  const i = process.argv.indexOf(`--${name}`)
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1]
  if (fallback === undefined) throw new Error(`scripted_server.js: --${name} is required (behaviours: ${BEHAVIOURS.join(', ')})`)
  return fallback
}

// stdout belongs to the READY line and the command replies: anything a library prints goes to stderr
const writeStdout = process.stdout.write.bind(process.stdout)
process.stdout.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb)
const say = line => writeStdout(line + '\n')

/**
 * Put `decide(client, packet)` before minecraft-protocol's own login handler: it returns a refusal reason
 * (the login is refused with it, in the login state, as a vanilla server refuses), 'hold' (the login is never
 * answered), a number of milliseconds (the login goes on after them), or null (the login goes on).
 */
function guardLogins (mcServer, decide) {
  mcServer.on('connection', client => {
    const login = client.rawListeners('login_start')
    client.removeAllListeners('login_start')
    client.once('login_start', (packet, meta) => {
      const verdict = decide(client, packet)
      if (verdict === 'hold') return
      const proceed = () => { for (const listener of login) listener.call(client, packet, meta) }
      if (typeof verdict === 'number') setTimeout(proceed, verdict)
      else if (verdict !== null) client.end(verdict.text, verdict.full)
      else proceed()
    })
  })
}

/** A bare minecraft-protocol server on loopback: status ping and login, no world. */
function bareServer ({ beforePing }) {
  const mc = require('minecraft-protocol')
  const server = mc.createServer({ host: '127.0.0.1', port: 0, 'online-mode': false, version: VERSION, hideErrors: true, beforePing })
  return new Promise(resolve => server.on('listening', () => resolve({ server, port: server.socketServer.address().port, stop: () => server.close() })))
}

const refusal = text => ({ text, full: JSON.stringify({ text }) })

async function start (behaviour) {
  const reason = option('reason', 'You are not white-listed on this server!')
  if (behaviour === 'silent') {
    const sockets = new Set()
    const server = net.createServer(socket => { sockets.add(socket); socket.on('close', () => sockets.delete(socket)); socket.on('error', () => {}) })
    await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
    return { port: server.address().port, stop: () => { for (const s of sockets) s.destroy(); server.close() } }
  }
  if (behaviour === 'refuse-login') {
    const s = await bareServer({})
    guardLogins(s.server, () => refusal(reason))
    return s
  }
  if (behaviour === 'slow') {
    const s = await bareServer({})
    guardLogins(s.server, () => 'hold')
    return s
  }
  if (behaviour === 'wrong-version') {
    const name = option('version-name', '1.20.4')
    const protocol = Number(option('version-protocol', '765'))
    const status = option('status', 'answer')
    const s = await bareServer({
      beforePing: response => (status === 'close' ? false : { ...response, version: { name, protocol } })
    })
    // vanilla refuses a newer client in the login state with this translated text
    guardLogins(s.server, () => ({
      text: `Outdated server! I'm still on ${name}`,
      full: JSON.stringify({ translate: 'multiplayer.disconnect.incompatible', with: [name] })
    }))
    return s
  }
  if (behaviour === 'kick-mid-episode') {
    const sidecar = option('sidecar')
    const { startServer, stopServer } = require(path.join(sidecar, 'src', 'server'))
    const { loadRules } = require(path.join(sidecar, 'src', 'rules'))
    const log = (scope, message) => process.stderr.write(`[${scope}] ${message}\n`)
    const operators = option('operators').split(',').filter(Boolean)
    const { serv, port } = await startServer({ rules: loadRules(option('rules')), log, operators })
    let refusing = null // null: nobody; true: everybody; else the one name refused
    let delayMs = 0
    guardLogins(serv._server, (client, packet) =>
      (refusing === true || refusing === packet.username ? refusal(reason) : (delayMs || null)))
    const commands = {
      kick () {
        const players = [...serv.players]
        for (const player of players) player.kick(reason)
        say('KICKED ' + JSON.stringify({ players: players.map(p => p.username) }))
      },
      refuse (name) { refusing = name || true; say('REFUSING') },
      admit () { refusing = null; say('ADMITTING') },
      delay (seconds) { delayMs = Number(seconds) * 1000; say('DELAYING') }
    }
    let buffered = ''
    process.stdin.on('data', chunk => {
      buffered += chunk.toString()
      let nl
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const [command, arg] = buffered.slice(0, nl).trim().split(/\s+/)
        buffered = buffered.slice(nl + 1)
        if (Object.hasOwn(commands, command)) commands[command](arg)
        else if (command) say(`UNKNOWN ${JSON.stringify(command)}; commands: ${Object.keys(commands).join(', ')}`)
      }
    })
    return { port, stop: () => stopServer(serv) }
  }
  throw new Error(`scripted_server.js: unknown --behaviour ${JSON.stringify(behaviour)}; one of ${BEHAVIOURS.join(', ')}`)
}

async function main () {
  const running = await start(option('behaviour'))
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await Promise.race([Promise.resolve(running.stop()).catch(() => {}), new Promise(resolve => setTimeout(resolve, 2000))])
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.stdin.on('end', stop)
  process.stdin.on('close', stop)
  process.stdin.resume()
  say('READY ' + JSON.stringify({ port: running.port }))
}

main().catch(err => {
  process.stderr.write(`scripted server failed: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
