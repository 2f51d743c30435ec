'use strict'
// Two arenas of one embedded server, as the sidecar runs them: a bot is told of block changes in chunks it
// has loaded and of the entities of its own arena only, and sees its peers where every reset put them
// (plugin/interest.js); a bot simulates physics only while it has a skill to do or its arena is being reset
// (world.js holdPhysics).

const test = require('node:test')
const assert = require('node:assert')
const { startServer, stopServer } = require('../src/server')
const { World, ARENA_HALF_WIDTH } = require('../src/world')
const { ARENA_SPACING } = require('../src/arenaPool')
const { waitFor, sleep } = require('../src/util')
const { RULES, SETTLE_MS } = require('./helpers')

const SPEC = { agents: ['agent_a', 'agent_b'], stations: [], positions: { agent_a: [0, 0, 0], agent_b: [3, 0, 0] } }
const SWAPPED = { ...SPEC, positions: { agent_a: [-6, 0, 9], agent_b: [0, 0, 0] } }

/** Two arenas, each reset once (its bots join in the lobby first); `watch(serv)` runs before anyone joins. */
async function twoArenas (watch = () => {}) {
  const log = () => {}
  const arenas = { x0: 0, spacing: ARENA_SPACING, halfWidth: ARENA_HALF_WIDTH }
  const { serv, port, floorY, api } = await startServer({ cookTicks: 2, rules: RULES, log, arenas, maxPlayers: 12 })
  watch(serv)
  const worlds = [0, 1].map(k => new World({ serv, api, port, floorY, rules: RULES, log, skillTimeoutMs: 8000, name: `a${k}`, origin: [k * ARENA_SPACING, 0] }))
  for (const w of worlds) await w.reset(SPEC)
  return {
    serv, api, floorY, worlds,
    async close () {
      for (const w of worlds) await w.close()
      await stopServer(serv)
      process.stdin.destroy()
    }
  }
}

/** Where `bot` sees `username`'s entity, or null if it sees none. */
const seen = (bot, username) => bot.players[username]?.entity?.position ?? null

/** Every bot of `world` sees each peer exactly where the reset put it, as soon as the reset is done. */
function assertPeersAt (world, spec, when) {
  for (const agent of spec.agents) {
    for (const peer of spec.agents.filter(p => p !== agent)) {
      const at = seen(world.bot(agent), world.username(peer))
      const want = world.absolute(spec.positions[peer]).offset(0.5, 0, 0.5)
      assert.ok(at && at.distanceTo(want) <= 0.5,
        `${when}: ${world.username(agent)} sees ${world.username(peer)} at ${at} instead of ${want}`)
    }
  }
}

test('a bot sees the bots of its own arena only, where each reset put them, and block changes only in chunks it has loaded', async () => {
  const t = await twoArenas()
  try {
    const [near, far] = t.worlds
    assertPeersAt(near, SPEC, 'after the first reset (from the lobby)')
    assertPeersAt(far, SPEC, 'after the first reset (from the lobby)')
    const a = near.bot('agent_a')
    const stranger = far.bot('agent_a')
    assert.ok(!seen(stranger, 'a0_agent_a') && !seen(stranger, 'a0_agent_b'), 'a bot of arena a1 sees the bots of a0')
    assert.ok(!seen(a, 'a1_agent_a'), 'a bot of arena a0 sees a bot of a1')
    await near.reset(SWAPPED)
    assertPeersAt(near, SWAPPED, 'after a reset that moved both bots')
    await near.reset(SPEC, { rebuild: true })
    assertPeersAt(near, SPEC, 'after a rebuild (both bots rejoined through the lobby)')
    await far.reset(SWAPPED, { rebuild: true })
    assertPeersAt(far, SWAPPED, 'after a rebuild of the other arena')
    const [mate, other] = [near.bot('agent_a'), far.bot('agent_a')]
    assert.ok(!seen(mate, 'a1_agent_a') && !seen(other, 'a0_agent_a'), 'a bot sees a bot of the other arena after the rebuilds')
    const changes = { near: 0, far: 0 }
    mate._client.on('block_change', () => changes.near++)
    other._client.on('block_change', () => changes.far++)
    const cell = near.absolute([5, 0, 5])
    await t.api.setBlock(cell, 'oak_planks')
    await waitFor(() => mate.blockAt(cell)?.name === 'oak_planks', SETTLE_MS, 'the arena-mate seeing the placed block')
    await sleep(300) // the far bot's copy, if it were sent, went out with the near one's
    assert.strictEqual(changes.far, 0, 'a bot 64 blocks away was sent the block change of a chunk it has not loaded')
    assert.ok(changes.near >= 1)
  } finally {
    await t.close()
  }
})

test('a move a client sent before it saw the reset\'s teleport is not applied after it', async () => {
  const moves = [] // every move the server applied: {who, position, teleport}
  const t = await twoArenas(serv => serv.on('newPlayer', player => player.on('move', ({ position, teleport }) => {
    moves.push({ who: player.username, position: position.clone(), teleport })
  })))
  try {
    for (const world of t.worlds) {
      for (const agent of world.agents()) {
        const who = world.username(agent)
        const mine = moves.filter(m => m.who === who)
        const teleported = mine.findIndex(m => m.teleport)
        assert.ok(teleported >= 0, `${who} was never teleported`)
        const stale = mine.slice(teleported).find(m => !world.inRegion(m.position))
        assert.ok(!stale, `${who} was moved back to ${stale?.position} (the lobby) after the reset's teleport`)
      }
    }
  } finally {
    await t.close()
  }
})

test('a bot simulates physics only while it has a skill to do', async () => {
  const t = await twoArenas()
  try {
    const [world] = t.worlds
    const a = world.bot('agent_a')
    assert.strictEqual(a.physicsEnabled, false, 'an idle bot still simulates physics after its reset')
    let during = null
    const call = world.checkCall({ id: 'w1', actor: 'agent_a', op: 'wait', args: { ticks: 10 } })
    const done = world.execute(call)
    await sleep(20)
    during = a.physicsEnabled
    const [event] = await done
    assert.ok(event.ok, event.reason)
    assert.strictEqual(during, true, 'a bot with a skill running does not simulate physics')
    assert.strictEqual(a.physicsEnabled, false, 'a bot whose skill ended still simulates physics')
    const walk = await world.execute(world.checkCall({ id: 'w2', actor: 'agent_a', op: 'wait', args: { ticks: 1 } }))
    assert.ok(walk[0].ok)
  } finally {
    await t.close()
  }
})
