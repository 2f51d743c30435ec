'use strict'
// The embedded Minecraft server: flying-squid in offline mode on loopback, an in-memory superflat
// world, view distance 2, and our game-logic plugin. Only this process's own bots may join, nobody is an
// operator, and no player command changes anything (plugin/admission.js, plugin/permissions.js).

const path = require('path')
const { timeoutScale } = require('./util')
const squid = require('flying-squid')
const { Vec3 } = require('vec3')

const MINECRAFT_VERSION = '1.21.4'
/** The protocol number of MINECRAFT_VERSION, as a server's status ping names it (the Python side's MINECRAFT_PROTOCOL). */
const MINECRAFT_PROTOCOL = 769
const PLUGIN_PATH = path.resolve(__dirname, 'plugin', 'index.js')
/**
 * Where players join, relative to (0, floor, 0): outside every arena (arenas keep |z| < 32, see arenaPool.js),
 * so a bot joining or rejoining never stands in an episode, picks up its items or blocks its bots.
 */
const LOBBY = Object.freeze([0.5, 0, -64.5])

/** Highest y at (0, 0) that holds a block, plus one: the first air layer, i.e. the arena floor. */
async function findFloorY (world) {
  for (let y = 255; y > -64; y--) {
    const block = await world.getBlock(new Vec3(0, y, 0))
    if (block && block.name !== 'air' && block.name !== 'void_air' && block.name !== 'cave_air') return y + 1
  }
  throw new Error('the superflat world has no ground at (0, 0)')
}

/**
 * Start the server. Resolves to `{serv, port, floorY, api}` once it listens.
 * `port` 0 picks a free port. `rules` are the rule tables (rules.js `loadRules`): the furnaces smelt by
 * `rules.recipes`. `log(scope, message)` receives every world edit, refused login and refused command.
 * `operators` is for tests only, where this server stands in for an external one: players of these names
 * may join from any local client and run every command (the sidecar passes none). `arenas`
 * (`{x0, spacing, halfWidth}`, the sidecar's arena geometry) lets players see the entities of their own
 * arena only (plugin/interest.js).
 */
async function startServer ({ port = 0, cookTicks = 200, rules, log, pickupDelayMs, throwerDelayMs, maxPlayers = 8, operators = [], arenas = null } = {}) {
  if (!rules || !rules.recipes) throw new Error('startServer needs the rule tables: pass rules = loadRules(dir) (src/rules.js)')
  const serv = squid.createMCServer({
    motd: 'gencoord',
    port,
    host: '127.0.0.1',
    'max-players': maxPlayers,
    'online-mode': false,
    logging: false, // true would also write a log file
    noConsoleOutput: true, // stdout is reserved for the READY line
    debug: () => {}, // also keeps flying-squid from installing process-wide crash handlers per player
    gameMode: 0,
    difficulty: 0,
    worldFolder: undefined, // in memory: nothing touches the disk
    generation: { name: 'superflat', options: { seed: 1 } },
    kickTimeout: 30000 * timeoutScale(), // a bot silent this long is kicked: stretched on a loaded machine (util.js)
    hideErrors: true, // a client's error is logged once by plugin/connections.js, not as a stack per connection
    plugins: { [PLUGIN_PATH]: { cookTicks, recipes: rules.recipes, log, pickupDelayMs, throwerDelayMs, operators, arenas } },
    modpe: false,
    'view-distance': 2,
    'player-list-text': { header: { text: '' }, footer: { text: '' } },
    'everybody-op': false,
    'max-entities': 200,
    version: MINECRAFT_VERSION
  })
  serv.on('error', err => log && log('server', `error: ${err && err.stack ? err.stack : err}`))
  await serv.waitForReady(15000)
  const floorY = await findFloorY(serv.overworld)
  // Vanilla-like random spawn points would make positions differ between runs; reset teleports anyway.
  serv.getSpawnPoint = async () => new Vec3(LOBBY[0], floorY + LOBBY[1], LOBBY[2])
  return { serv, port: serv.listeningPort, floorY, api: serv.gencoord }
}

/** Close the server's socket and stop its tick loop. */
async function stopServer (serv) {
  // quit() waits for every player to disconnect, which never comes for a bot that already left.
  await Promise.race([serv.quit('shutdown').catch(() => {}), new Promise(resolve => setTimeout(resolve, 1000))])
  if (serv.tickInterval) clearInterval(serv.tickInterval)
  try { serv._server.close() } catch (err) { /* already closed */ }
}

module.exports = { startServer, stopServer, MINECRAFT_VERSION, MINECRAFT_PROTOCOL, LOBBY }
