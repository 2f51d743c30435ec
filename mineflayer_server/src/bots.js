'use strict'
// Mineflayer bots: connect over a socket the embedded server recognises as ours (botSockets.js), wait
// until the ground under the feet is loaded, set up pathfinding that never digs, never builds towers and
// never uses inventory blocks as scaffolding (those would silently change inventories and the world).

const mineflayer = require('mineflayer')
const { pathfinder, Movements } = require('mineflayer-pathfinder')
const { withTimeout, waitFor, TimeoutError, timeoutScale } = require('./util')
const { MINECRAFT_VERSION, MINECRAFT_PROTOCOL } = require('./server')
const { connectBotSocket } = require('./botSockets')
const { ProtocolError } = require('./protocol')
const { rememberVersions } = require('./minecraftData')

rememberVersions()

/** The text of a kick reason: a chat component (JSON text or an object, a translation with its arguments) or a plain string. */
function reasonText (reason) {
  let value = reason
  if (typeof value === 'string') { try { value = JSON.parse(value) } catch (err) { return value } }
  if (value && typeof value === 'object') {
    const text = value.text ?? value.value?.text?.value
    if (typeof text === 'string') return text
    if (typeof value.translate === 'string') {
      const args = Array.isArray(value.with) ? value.with.map(a => (typeof a === 'string' ? a : reasonText(a))) : []
      return args.length ? `${value.translate} (${args.join(', ')})` : value.translate
    }
  }
  return JSON.stringify(reason)
}

/**
 * A refusal that names a version: vanilla's `multiplayer.disconnect.incompatible` / `outdated_client` /
 * `outdated_server` ("Incompatible client! Please use 1.20.4", "Outdated server! I'm still on ..."),
 * minecraft-protocol's "Wrong protocol version", and the client's own "This server is version ...".
 */
const VERSION_REFUSAL = /\b(incompatible|outdated)|protocol version|server is version/i
/** Connection errors that mean nothing accepts connections at the address. */
const UNREACHABLE = /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN/

/** What the server at `where` did to `username` before it spawned, as the fault the client raises (protocol.js SERVER_FAULTS). */
function serverFault ({ where, username, kicked, failed, endReason, timeoutMs }) {
  const said = kicked ?? failed
  if (said && VERSION_REFUSAL.test(said)) {
    return new ProtocolError('ServerVersionMismatch', `the server at ${where} refused ${username} as a client of another ` +
      `version: ${said}; the bots speak Minecraft ${MINECRAFT_VERSION} (protocol ${MINECRAFT_PROTOCOL}): run a ${MINECRAFT_VERSION} server there`)
  }
  if (kicked !== null) {
    return new ProtocolError('ServerRefused', `the server at ${where} refused ${username}: ${kicked}; check that it runs with ` +
      'online-mode=false and admits the bots (whitelist, bans, max-players)')
  }
  if (timeoutMs !== undefined) {
    return new ProtocolError('ServerTimeout', `${username} did not spawn on loaded ground within ${timeoutMs / 1000} s at ${where}: the server ` +
      'is slow, hung, or not a Minecraft server; check the host and port, and the server\'s load (on a loaded machine, ' +
      'GENCOORD_TIMEOUT_SCALE stretches the startup deadlines)')
  }
  if (failed && UNREACHABLE.test(failed)) {
    return new ProtocolError('ServerUnreachable', `${username} cannot reach the server at ${where} (${failed}); start a ` +
      `Minecraft ${MINECRAFT_VERSION} server there with online-mode=false`)
  }
  return new ProtocolError('ServerRefused', `the server at ${where} closed ${username}'s connection before it spawned, ` +
    `without a reason (${failed ?? endReason}); check that it is a Minecraft ${MINECRAFT_VERSION} server with online-mode=false`)
}

/**
 * How long a bot may take to join and stand on loaded ground before connectBot gives up. A refusal or a
 * dropped connection ends the wait at once, so this only bounds a login that hangs; on a loaded 2-core
 * machine (two sidecars starting beside a busy test suite) a spawn took over 20 s. Within the Python
 * side's 60 s for a reset that rejoins bots and its 90 s for READY. GENCOORD_TIMEOUT_SCALE stretches it with
 * them (util.js timeoutScale).
 */
const SPAWN_TIMEOUT_MS = 40000 * timeoutScale()

/**
 * The pathfinder's budget for planning one walk, in wall time. Its A* thinks 40 ms per physics tick, and
 * a loaded machine delays the ticks: a 2 s budget ran out planning a walk across an arena beside a busy
 * test suite. A goal it cannot reach fails when the search runs out of loaded ground (0.5 s measured for
 * a goal in the air), not at this budget.
 */
const PATH_THINK_MS = 10000

/** How long a closed connection waits for the server's reason, which can come after the socket's end. */
const KICK_GRACE_MS = 1000

/**
 * Join the server at `host:port` in offline mode as `username`; resolves once the bot stands on loaded
 * ground. Rejects at once, with the server's reason, when the server refuses or drops the bot before it spawns.
 */
async function connectBot (username, port, log, { host = '127.0.0.1', timeoutMs = SPAWN_TIMEOUT_MS } = {}) {
  const bot = mineflayer.createBot({
    host,
    port,
    username,
    auth: 'offline',
    connect: client => client.setSocket(connectBotSocket({ host, port, username })),
    version: MINECRAFT_VERSION,
    hideErrors: true,
    logErrors: false,
    physicsEnabled: true
  })
  let kicked = null
  let failed = null
  const where = `${host}:${port}`
  bot.on('error', err => { failed = err && err.message; log('bot', `${username} error: ${failed}`) })
  // a kick after the spawn is kept on the bot: the fault that ends its episode names it (whyEnded)
  // The reason is read from the client's own packets: mineflayer's 'kicked' comes from a plugin it loads
  // on a timer after createBot, and a local server's refusal can arrive before that (seen on a busy
  // machine: the login 'disconnect' packet came, 'kicked' never did).
  const onKick = packet => {
    kicked = reasonText(packet.reason)
    bot.gcKicked = kicked
    log('bot', `${username} kicked: ${JSON.stringify(packet.reason)}`)
    bot.emit('gcKicked')
  }
  bot._client.on('disconnect', onKick) // login and configuration states
  bot._client.on('kick_disconnect', onKick) // play state
  bot.on('end', reason => { bot.gcEnded = true; bot.gcEndReason = reason; log('bot', `${username} disconnected: ${reason}`) })
  const spawned = new Promise((resolve, reject) => {
    const settle = endReason => reject(serverFault({ where, username, kicked, failed, endReason }))
    // a kick packet comes before the socket's end; should the end overtake it in the client's stream
    // pipeline, the reason still has a moment to arrive
    const onEnd = reason => {
      if (kicked !== null) return settle(reason)
      const late = setTimeout(() => settle(reason), KICK_GRACE_MS)
      bot.once('gcKicked', () => { clearTimeout(late); settle(reason) })
    }
    bot.once('end', onEnd)
    bot.once('spawn', () => { bot.removeListener('end', onEnd); resolve() })
  })
  try {
    await withTimeout(spawned, timeoutMs, `${username} spawn`)
    await waitFor(() => bot.entity && bot.blockAt(bot.entity.position.offset(0, -1, 0)), timeoutMs, `${username} chunk under feet`)
  } catch (err) {
    bot.end()
    throw err instanceof TimeoutError ? serverFault({ where, username, kicked, failed, timeoutMs }) : err
  }
  bot.loadPlugin(pathfinder)
  const movements = new Movements(bot)
  movements.canDig = false
  movements.allow1by1towers = false
  movements.scafoldingBlocks = []
  movements.allowParkour = false
  movements.allowSprinting = true // walks dominate episode time; sprinting changes no world state
  bot.pathfinder.setMovements(movements)
  bot.pathfinder.thinkTimeout = PATH_THINK_MS
  return bot
}

/** True when the bot's connection is gone (or going: the server kicked it) and it must be rejoined. */
const isDisconnected = bot => !bot || bot.gcEnded || bot.gcKicked !== undefined || !bot.entity

/**
 * Why a spawned bot's connection ended, for the fault that ends its episode: the server's kick reason (waited
 * for a moment, as it may arrive after the socket's end) or the connection's own end.
 */
async function whyEnded (bot) {
  if (!bot) return 'it never joined'
  await waitFor(() => bot.gcKicked !== undefined, KICK_GRACE_MS, 'a kick reason').catch(() => {})
  if (bot.gcKicked !== undefined) return `kicked by the server: ${bot.gcKicked}`
  return `its connection closed: ${bot.gcEndReason ?? 'no reason given'}`
}

module.exports = { connectBot, isDisconnected, whyEnded, SPAWN_TIMEOUT_MS }
