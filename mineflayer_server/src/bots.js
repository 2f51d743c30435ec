'use strict'
// Mineflayer bots: connect, wait until the ground under the feet is loaded, set up pathfinding
// that never digs, never builds towers and never uses inventory blocks as scaffolding (those would
// silently change inventories and the world).

const { once } = require('events')
const mineflayer = require('mineflayer')
const { pathfinder, Movements } = require('mineflayer-pathfinder')
const { withTimeout, waitFor } = require('./util')
const { MINECRAFT_VERSION } = require('./server')

/** Join the server at `host:port` in offline mode as `username`; resolves once the bot stands on loaded ground. */
async function connectBot (username, port, log, { host = '127.0.0.1', timeoutMs = 20000 } = {}) {
  const bot = mineflayer.createBot({
    host,
    port,
    username,
    auth: 'offline',
    version: MINECRAFT_VERSION,
    hideErrors: true,
    logErrors: false,
    physicsEnabled: true
  })
  bot.on('error', err => log('bot', `${username} error: ${err && err.message}`))
  bot.on('kicked', reason => log('bot', `${username} kicked: ${JSON.stringify(reason)}`))
  bot.on('end', reason => { bot.gcEnded = true; log('bot', `${username} disconnected: ${reason}`) })
  try {
    await withTimeout(once(bot, 'spawn'), timeoutMs, `${username} spawn`)
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
  bot.pathfinder.thinkTimeout = 2000
  return bot
}

/** True when the bot's connection is gone and it must be rejoined. */
const isDisconnected = bot => !bot || bot.gcEnded || !bot.entity

module.exports = { connectBot, isDisconnected }
