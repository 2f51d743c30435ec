'use strict'
// Two arenas of one embedded server, as the sidecar runs them: a bot is told of block changes in chunks it
// has loaded only (plugin/interest.js); a bot simulates physics only while it has a skill to do or its
// arena is being reset (world.js holdPhysics).

const test = require('node:test')
const assert = require('node:assert')
const { startServer, stopServer } = require('../src/server')
const { World } = require('../src/world')
const { ARENA_SPACING } = require('../src/arenaPool')
const { waitFor, sleep } = require('../src/util')
const { RULES, SETTLE_MS } = require('./helpers')

const SPEC = { agents: ['agent_a', 'agent_b'], stations: [], positions: { agent_a: [0, 0, 0], agent_b: [3, 0, 0] } }

async function twoArenas () {
  const log = () => {}
  const { serv, port, floorY, api } = await startServer({ cookTicks: 2, rules: RULES, log, maxPlayers: 12 })
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

test('a bot is sent the block changes of chunks it has loaded only', async () => {
  const t = await twoArenas()
  try {
    const [near, far] = t.worlds
    const a = near.bot('agent_a')
    const stranger = far.bot('agent_a')
    const changes = { near: 0, far: 0 }
    a._client.on('block_change', () => changes.near++)
    stranger._client.on('block_change', () => changes.far++)
    const cell = near.absolute([5, 0, 5])
    await t.api.setBlock(cell, 'oak_planks')
    await waitFor(() => a.blockAt(cell)?.name === 'oak_planks', SETTLE_MS, 'the arena-mate seeing the placed block')
    await sleep(300) // the far bot's copy, if it were sent, went out with the near one's
    assert.strictEqual(changes.far, 0, 'a bot 64 blocks away was sent the block change of a chunk it has not loaded')
    assert.ok(changes.near >= 1)
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
