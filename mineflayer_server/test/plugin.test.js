'use strict'
// Every behaviour of the game-logic plugin, driven by real mineflayer clients on the embedded server.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Vec3 } = require('vec3')
const { startArena, countOf, waitFor, SETTLE_MS } = require('./helpers')
const { faceForToss } = require('../src/movement')

let arena
const at = (x, y, z) => new Vec3(x, arena.floorY + y, z)
const id = name => arena.serv.registry.itemsByName[name].id
const serverCount = (agent, item) => arena.api.inventoryCounts(arena.player(agent))[item] || 0

/** Server-side setup: inventories and positions, then wait until the clients see them. */
async function setup (invA, invB, posA = [0, 0, 0], posB = [2, 0, 0]) {
  for (const [agent, inv, pos] of [['agent_a', invA, posA], ['agent_b', invB, posB]]) {
    arena.api.setInventory(arena.player(agent), inv)
    await arena.api.teleport(arena.player(agent), at(...pos))
  }
  for (const [bot, inv] of [[arena.a, invA], [arena.b, invB]]) {
    await waitFor(() => Object.entries(inv).every(([n, c]) => countOf(bot, n) === c) &&
      bot.inventory.items().length === Object.keys(inv).length, SETTLE_MS, 'inventory sync')
  }
}

before(async () => { arena = await startArena({ cookTicks: 2 }) })
after(async () => {
  assert.deepEqual(arena.disconnects, [], 'no bot may be disconnected by any plugin behaviour')
  await arena.close()
})

test('teleports of many blocks keep every client connected and seen by the others', async () => {
  await setup({}, {}, [0, 0, 0], [3, 0, 0])
  await new Promise(resolve => setTimeout(resolve, 300)) // a late position resend would move B back to spawn
  assert.ok(arena.b.entity.position.distanceTo(at(3.5, 0, 0.5)) < 0.1, 'the first teleport after joining sticks')
  assert.ok(arena.player('agent_b').position.distanceTo(at(3.5, 0, 0.5)) < 0.1)
  await arena.api.teleport(arena.player('agent_a'), at(25, 0, -20))
  await waitFor(() => arena.a.entity.position.distanceTo(at(25.5, 0, -19.5)) < 0.1, SETTLE_MS, 'A moved')
  await arena.api.teleport(arena.player('agent_a'), at(1, 0, 1))
  await waitFor(() => arena.b.players.agent_a?.entity?.position.distanceTo(at(1.5, 0, 1.5)) < 0.5, SETTLE_MS, 'B sees A back')
    .catch(err => { // where each side has A, for a failure that comes rarely
      throw new Error(`${err.message}: the server has A at ${arena.player('agent_a').position}, A's client at ` +
        `${arena.a.entity.position}, B's client at ${arena.b.players.agent_a?.entity?.position}; B knows the players ` +
        `${Object.keys(arena.b.players).join(', ')} and player entities ${Object.values(arena.b.entities).filter(e => e.type === 'player')
          .map(e => `${e.id} ${e.username} at ${e.position}`).join(', ')}; the server's A is entity ${arena.player('agent_a').id}`)
    })
  assert.equal(arena.b.players.agent_a.entity.type, 'player')
  assert.deepEqual(arena.disconnects, [])
  assert.ok(arena.lines.some(l => l.includes('[edit] teleport agent_a 25 5 -20'.replace('5', String(arena.floorY)))))
})

test('/give stores numeric counts that add up', async () => {
  await setup({}, {})
  // from the server's console: no player may run /give here (permissions.js; external.test.js has an operator)
  await arena.serv.handleCommand('give agent_a oak_log 4')
  await arena.serv.handleCommand('give agent_a oak_log 3')
  await waitFor(() => countOf(arena.a, 'oak_log') === 7, SETTLE_MS, 'A has 7 logs')
  assert.equal(serverCount('agent_a', 'oak_log'), 7)
  assert.ok(arena.lines.some(l => l.includes('[edit] give agent_a oak_log 3')))
})

/** A faces B as the give skill does: until the server has A where it stands, looking at B (a toss thrown
 * on the server's older state falls short); with its physics running, as during a skill. */
const faceB = () => arena.world.withPhysics(() => faceForToss({ bot: arena.a, actor: 'agent_a', world: arena.world, timeoutMs: SETTLE_MS },
  arena.b.entity.position.offset(0, 1, 0), 'agent_b'))

test('a tossed stack is picked up whole by the peer and recorded as a handoff', async () => {
  await setup({ oak_planks: 10 }, {}, [0, 0, 0], [2, 0, 0])
  arena.api.clearPickups()
  await faceB()
  await arena.a.toss(id('oak_planks'), null, 10)
  await waitFor(() => serverCount('agent_b', 'oak_planks') === 10, SETTLE_MS, 'B picked up 10 planks')
  await waitFor(() => countOf(arena.b, 'oak_planks') === 10, SETTLE_MS, "B's client sees 10 planks")
  assert.equal(serverCount('agent_a', 'oak_planks'), 0)
  assert.deepEqual(arena.api.pickups().map(({ from, to, item, count }) => ({ from, to, item, count })),
    [{ from: 'agent_a', to: 'agent_b', item: 'oak_planks', count: 10 }])
})

test('a toss meant for another player is left to it: a bystander next to it picks nothing up', async () => {
  await setup({ oak_planks: 4 }, {}, [0, 0, 0], [2, 0, 0])
  arena.api.clearPickups()
  arena.api.reserveTosses('agent_a', 'agent_c') // a third bot's handoff, B only stands by
  try {
    await faceB()
    await arena.a.toss(id('oak_planks'), null, 4)
    await new Promise(resolve => setTimeout(resolve, 1500))
    assert.equal(serverCount('agent_b', 'oak_planks'), 0)
    assert.deepEqual(arena.api.pickups(), [])
  } finally {
    arena.api.reserveTosses('agent_a', null)
    arena.api.clearDrops()
  }
})

test('a thrown item lying on the floor stays there through long server ticks (a stalled event loop)', async () => {
  await setup({ oak_planks: 3 }, {}, [0, 0, 0], [2, 0, 0])
  arena.api.reserveTosses('agent_a', 'agent_c') // nobody here may pick it up
  try {
    await faceB()
    await arena.a.toss(id('oak_planks'), null, 3)
    const drop = () => Object.values(arena.serv.entities).find(e => e.gcItem && e.gcItem.name === 'oak_planks')
    let last = null
    await waitFor(() => {
      const y = drop()?.position.y
      const still = y !== undefined && y === last && drop().velocity.x === 0
      last = y
      return still
    }, SETTLE_MS, 'the item to come to rest', 200)
    const rest = drop().position.clone()
    // flying-squid moves an entity by the wall time since the last tick and checks only the block its step
    // ends in: after a 0.6 s stall, gravity's step from rest ends below the floor
    for (let i = 0; i < 5; i++) arena.serv.emit('tick', 0.9)
    await new Promise(resolve => setTimeout(resolve, 500))
    assert.ok(drop(), 'the item is gone')
    assert.ok(drop().position.distanceTo(rest) < 0.2, `the item moved from ${rest} to ${drop().position}`)
  } finally {
    arena.api.reserveTosses('agent_a', null)
    arena.api.clearDrops()
  }
})

test('a chest stores what one bot deposits and the other bot sees and withdraws it', async () => {
  await setup({ cobblestone: 5 }, {})
  const pos = at(0, 0, 2)
  await arena.api.setBlock(pos, 'chest')
  arena.api.setContainer('chest', pos, {})
  await waitFor(() => arena.a.blockAt(pos)?.name === 'chest' && arena.b.blockAt(pos)?.name === 'chest', SETTLE_MS, 'chest visible')
  const chestA = await arena.a.openContainer(arena.a.blockAt(pos))
  await chestA.deposit(id('cobblestone'), null, 5)
  arena.a.closeWindow(chestA)
  await arena.world.barrierFor(arena.a)
  assert.deepEqual(arena.api.containerCounts(pos), { cobblestone: 5 })
  assert.equal(serverCount('agent_a', 'cobblestone'), 0)

  const chestB = await arena.b.openContainer(arena.b.blockAt(pos))
  assert.equal(chestB.containerItems().reduce((n, i) => n + i.count, 0), 5)
  await chestB.withdraw(id('cobblestone'), null, 2)
  arena.b.closeWindow(chestB)
  await arena.world.barrierFor(arena.b)
  assert.deepEqual(arena.api.containerCounts(pos), { cobblestone: 3 })
  assert.equal(serverCount('agent_b', 'cobblestone'), 2)
})

test('bot.craft works in the 2x2 grid with results from minecraft-data recipes', async () => {
  await setup({ oak_log: 2 }, {})
  const planks = arena.a.recipesFor(id('oak_planks'), null, 2, null)[0]
  await arena.a.craft(planks, 2, null)
  await arena.world.barrierFor(arena.a)
  assert.deepEqual(arena.api.inventoryCounts(arena.player('agent_a')), { oak_planks: 8 })
  const table = arena.a.recipesFor(id('crafting_table'), null, 1, null)[0]
  await arena.a.craft(table, 1, null)
  await arena.world.barrierFor(arena.a)
  assert.deepEqual(arena.api.inventoryCounts(arena.player('agent_a')), { oak_planks: 4, crafting_table: 1 })
})

test('bot.craft works on a crafting table (3x3 recipe)', async () => {
  await setup({ oak_planks: 9 }, {})
  const pos = at(-2, 0, 0)
  await arena.api.setBlock(pos, 'crafting_table')
  await waitFor(() => arena.a.blockAt(pos)?.name === 'crafting_table', SETTLE_MS, 'table visible')
  const tableBlock = arena.a.blockAt(pos)
  assert.equal(arena.a.recipesFor(id('chest'), null, 1, null).length, 0, 'a chest needs the 3x3 grid')
  const recipe = arena.a.recipesFor(id('chest'), null, 1, tableBlock)[0]
  await arena.a.craft(recipe, 1, tableBlock)
  await arena.world.barrierFor(arena.a)
  assert.deepEqual(arena.api.inventoryCounts(arena.player('agent_a')), { chest: 1, oak_planks: 1 })
})

test('a furnace smelts input with fuel into output that the bot takes', async () => {
  await setup({ raw_iron: 2, coal: 1 }, {})
  const pos = at(0, 0, -2)
  await arena.api.setBlock(pos, 'furnace')
  arena.api.setContainer('furnace', pos, {})
  arena.api.setCookTicks(2)
  await waitFor(() => arena.a.blockAt(pos)?.name === 'furnace', SETTLE_MS, 'furnace visible')
  const furnace = await arena.a.openFurnace(arena.a.blockAt(pos))
  await furnace.putInput(id('raw_iron'), null, 2)
  await furnace.putFuel(id('coal'), null, 1)
  await waitFor(() => furnace.outputItem()?.count === 2, SETTLE_MS, 'two ingots in the output')
  assert.deepEqual(arena.api.furnaceCounts(pos), { input: {}, fuel: {}, output: { iron_ingot: 2 } })
  await furnace.takeOutput()
  arena.a.closeWindow(furnace)
  await arena.world.barrierFor(arena.a)
  assert.deepEqual(arena.api.inventoryCounts(arena.player('agent_a')), { iron_ingot: 2 })
  assert.deepEqual(arena.api.furnaceCounts(pos).output, {})
})

test('fuel smelts the items recipes.json says at any cook time, as the Python world settles it', async () => {
  // oak_planks smelt 1.5 items each: three cobblestone burn two planks (the second's half is lost), one is left
  await setup({ cobblestone: 3, oak_planks: 3 }, {})
  const pos = at(-2, 0, -2)
  await arena.api.setBlock(pos, 'furnace')
  arena.api.setContainer('furnace', pos, {})
  arena.api.setCookTicks(2)
  await waitFor(() => arena.a.blockAt(pos)?.name === 'furnace', SETTLE_MS, 'furnace visible')
  const furnace = await arena.a.openFurnace(arena.a.blockAt(pos))
  await furnace.putFuel(id('oak_planks'), null, 3)
  await furnace.putInput(id('cobblestone'), null, 3)
  await waitFor(() => furnace.outputItem()?.count === 3, SETTLE_MS, 'three stone in the output')
  await new Promise(resolve => setTimeout(resolve, 200)) // the last plank would be lit within a few ticks if it were needed
  arena.a.closeWindow(furnace)
  assert.deepEqual(arena.api.furnaceCounts(pos), { input: {}, fuel: { oak_planks: 1 }, output: { stone: 3 } })
  assert.deepEqual(arena.api.smeltingTable().smelting, arena.world.rules.recipes.smelting)
})

test('read-back API reports blocks, inventories and containers from the server', async () => {
  await setup({ stone: 3 }, { dirt: 1 })
  const pos = at(3, 0, 3)
  await arena.api.setBlock(pos, 'cobblestone')
  assert.deepEqual(await arena.api.blockNames([pos, at(3, 1, 3), at(3, -1, 3)]), ['cobblestone', 'air', 'grass_block'])
  assert.deepEqual(arena.api.inventoryCounts(arena.player('agent_b')), { dirt: 1 })
  assert.deepEqual(arena.api.containerCounts(at(9, 0, 9)), {})
  assert.ok(arena.api.touchedPositions().some(p => p.equals(pos)))
  await arena.api.setBlock(pos, 'air')
  assert.ok(!arena.api.touchedPositions().some(p => p.equals(pos)))
  assert.ok(arena.lines.some(l => l.includes(`[edit] setblock 3 ${arena.floorY} 3 cobblestone`)))
})

test('the barrier resolves only after the bot\'s earlier clicks are applied', async () => {
  await setup({ stick: 7 }, {})
  const pos = at(2, 0, -2)
  await arena.api.setBlock(pos, 'chest')
  arena.api.setContainer('chest', pos, {})
  await waitFor(() => arena.a.blockAt(pos)?.name === 'chest', SETTLE_MS, 'chest visible')
  const chest = await arena.a.openContainer(arena.a.blockAt(pos))
  await chest.deposit(id('stick'), null, 7)
  arena.a.closeWindow(chest)
  await arena.world.barrierFor(arena.a) // no sleep: the barrier alone orders the read after the clicks
  assert.deepEqual(arena.api.containerCounts(pos), { stick: 7 })
  assert.equal(await arena.world.barrier(), true)
})

test('World.reset rejoins a bot whose connection dropped, and only that bot', async () => {
  const spec = {
    agents: ['agent_a', 'agent_b'],
    stations: [{ name: 'c', kind: 'chest', pos: [1, 0, 3], cells: [] }],
    positions: { agent_a: [0, 0, 0], agent_b: [2, 0, 0] },
    inventories: { agent_b: { stick: 2 } },
    containers: { c: { stick: 1 } }
  }
  const dropped = arena.b
  dropped._client.end('network trouble')
  await waitFor(() => dropped.gcEnded, SETTLE_MS, 'B disconnected')
  arena.disconnects.length = 0 // this disconnect is the point of the test
  const { rejoined } = await arena.world.reset(spec)
  assert.deepEqual(rejoined, ['agent_b'])
  assert.notEqual(arena.world.bot('agent_b'), dropped)
  assert.equal(arena.world.bot('agent_a'), arena.a, 'agent_a kept its connection')
  const truth = await arena.world.observe()
  assert.deepEqual(truth.inventories, { agent_a: {}, agent_b: { stick: 2 } })
  assert.deepEqual(truth.containers, { c: { stick: 1 } })
  arena.b = arena.world.bot('agent_b')
})

test('a toss is aimed when the server has the giver where its bot stands, looking at the receiver', async () => {
  await setup({}, {}, [0, 0, 0], [3, 0, 0])
  const aimed = () => arena.world.arena.tossAimed('agent_a', 'agent_b', arena.a.entity.position)
  await arena.a.lookAt(arena.b.entity.position.offset(0, 1, 0).offset(-6, 0, 0), true) // away from B
  await waitFor(() => !aimed(), SETTLE_MS, 'A looking away')
  await faceB()
  assert.equal(aimed(), true)
  // the server's position is the check's, not the bot's: a bot moved only on its own side is not aimed
  assert.equal(arena.world.arena.tossAimed('agent_a', 'agent_b', arena.a.entity.position.offset(1, 0, 0)), false)
})
