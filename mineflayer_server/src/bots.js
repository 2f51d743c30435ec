'use strict'
// Mineflayer bots: connect over a socket the embedded server recognises as ours (botSockets.js), wait
// until the ground under the feet is loaded, set up pathfinding that never digs, never builds towers and
// never uses inventory blocks as scaffolding (those would silently change inventories and the world).

const mineflayer = require('mineflayer')
const { pathfinder, Movements } = require('mineflayer-pathfinder')
const { withTimeout, waitFor } = require('./util')
const { MINECRAFT_VERSION } = require('./server')
const { connectBotSocket } = require('./botSockets')
const { rememberVersions } = require('./minecraftData')

rememberVersions()

/** The text of a kick reason: a chat component (JSON text or an object) or a plain string. */
function reasonText (reason) {
  let value = reason
  if (typeof value === 'string') { try { value = JSON.parse(value) } catch (err) { return value } }
  if (value && typeof value === 'object') {
    const text = value.text ?? value.value?.text?.value ?? value.translate
    if (typeof text === 'string') return text
  }
  return JSON.stringify(reason)
}

/**
 * How long a bot may take to join and stand on loaded ground before connectBot gives up. A refusal or a
 * dropped connection ends the wait at once, so this only bounds a login that hangs; on a loaded 2-core
 * machine (two sidecars starting beside a busy test suite) a spawn took over 20 s. Within the Python
 * side's 60 s for a reset that rejoins bots and its 90 s for READY.
 */
const SPAWN_TIMEOUT_MS = 40000

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
  bot.on('error', err => { failed = err && err.message; log('bot', `${username} error: ${failed}`) })
  bot.on('kicked', reason => { kicked = reasonText(reason); log('bot', `${username} kicked: ${JSON.stringify(reason)}`) })
  bot.on('end', reason => { bot.gcEnded = true; log('bot', `${username} disconnected: ${reason}`) })
  const spawned = new Promise((resolve, reject) => {
    const settle = reason => reject(new Error(kicked !== null
      ? `the server at ${host}:${port} refused ${username}: ${kicked}`
      : `${username}'s connection to ${host}:${port} closed before it spawned (${failed ?? reason})`))
    // the socket's end is seen at once, while the kick that came before it may still be in the client's
    // packet pipeline (seen on a busy machine): give the reason a moment to arrive
    const onEnd = reason => {
      if (kicked !== null) return settle(reason)
      const late = setTimeout(() => settle(reason), KICK_GRACE_MS)
      bot.once('kicked', () => { clearTimeout(late); settle(reason) })
    }
    bot.once('end', onEnd)
    bot.once('spawn', () => { bot.removeListener('end', onEnd); resolve() })
  })
  try {
    await withTimeout(spawned, timeoutMs, `${username} spawn`)
    await waitFor(() => bot.entity && bot.blockAt(bot.entity.position.offset(0, -1, 0)), timeoutMs, `${username} chunk under feet`)
  } catch (err) {
    bot.end()
    throw err
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

/** True when the bot's connection is gone and it must be rejoined. */
const isDisconnected = bot => !bot || bot.gcEnded || !bot.entity

module.exports = { connectBot, isDisconnected, SPAWN_TIMEOUT_MS }
