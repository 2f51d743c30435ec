'use strict'
// How the skills move: the standpoint planner (pure geometry), and on the embedded server that walks
// end within reach, that a give comes only within toss range of a receiver who stands still (and walks
// onto a toss only when its items landed out of reach), and that a site is filled in fill order from as
// few standpoints as its geometry allows, on the side the bot comes from; every event counts the
// executor actions its skill took, and a handoff event carries both inventories around the toss.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Vec3 } = require('vec3')
const { planStandpoint, reachableRun, farthestFirst, canPlaceFrom, bodyBlocks, PLACE_REACH } = require('../src/standpoint')
const { startArena, waitFor, SETTLE_MS } = require('./helpers')

// ---------- the planner, on a flat world whose ground is every block below y = 0 ----------

const flat = (x, y, z) => y < 0
const rows = xs => xs.flatMap(x => [0, 1, 2, 3].map(z => new Vec3(x, 0, z)))
const SITE = rows([-5, -6, -7]) // fill order: the row nearest the arena centre first, as in the layout

test('a run of cells is limited by reach, by sight past the cells placed before, and by the body', () => {
  const eastOfSite = new Vec3(-3.5, 0, 4.5) // beyond the end of the first row, which is filled towards it
  assert.equal(reachableRun(eastOfSite, SITE, flat), 4, 'the rows behind the first are out of reach from there')
  const besideSite = new Vec3(-3.5, 0, 1.5) // beside the first row, on the side a bot comes from
  assert.equal(reachableRun(besideSite, SITE, flat), 12, 'clicking the farthest cells first, the whole site is in sight')
  const eye = besideSite.offset(0, 1.62, 0)
  const order = farthestFirst(eye, SITE.slice(0, 8)).map(c => `${c.x},${c.z}`)
  for (const z of [0, 1, 2, 3]) assert.ok(order.indexOf(`-6,${z}`) < order.indexOf(`-5,${z}`), `the far cell before the one in front of it: ${order}`)
  const firstRowBuilt = (x, y, z) => y < 0 || (x === -5 && y === 0)
  assert.equal(reachableRun(besideSite, SITE.slice(4), firstRowBuilt), 0, 'a built row hides the rows behind it')
  const westOfSite = new Vec3(-7.5, 0, 2.5) // the block column x = -8, beyond the far row
  assert.equal(reachableRun(westOfSite, SITE, flat), 12)

  const origin = new Vec3(0.5, 1.62, 0.5)
  assert.equal(canPlaceFrom(origin, new Vec3(3, 0, 0), flat), true)
  const wall = (x, y, z) => y < 0 || (x === 2 && y === 0 && z === 0)
  assert.equal(canPlaceFrom(origin, new Vec3(3, 0, 0), wall), false, 'a block between eye and face blocks the click')
  assert.equal(canPlaceFrom(origin, new Vec3(Math.ceil(PLACE_REACH) + 1, 0, 0), flat), false, 'out of reach')

  assert.deepEqual([...bodyBlocks(new Vec3(0.5, 0, 0.5))].sort(), ['0,0,0', '0,1,0'])
  assert.deepEqual([...bodyBlocks(new Vec3(0.9, 0, 0.5))].sort(), ['0,0,0', '0,1,0', '1,0,0', '1,1,0'])
  assert.equal(reachableRun(new Vec3(0.9, 0, 0.5), [new Vec3(1, 0, 0)], flat), 0, 'no block goes where the body is')
})

test('the planner stays put when it can, walks a little for a near row, builds a site from its near side, never from inside it', () => {
  const inReach = planStandpoint({ cells: SITE.slice(0, 2), from: new Vec3(-2.5, 0, 0.5), solid: flat, avoid: SITE })
  assert.deepEqual(inReach, { stand: null, covers: 2 })

  const from = new Vec3(-0.5, 0, 0.5)
  const near = planStandpoint({ cells: SITE.slice(0, 4), from, solid: flat, avoid: SITE })
  assert.equal(near.covers, 4)
  assert.ok(near.stand.x >= -4, `the first row is built from its own side, got ${near.stand}`)
  assert.ok(near.stand.offset(0.5, 0, 0.5).distanceTo(from) < 3, `a short walk, got ${near.stand}`)

  const whole = planStandpoint({ cells: SITE, from, solid: flat, avoid: SITE })
  assert.equal(whole.covers, 12)
  assert.ok(whole.stand.x >= -4, `the whole site is built from the side the bot comes from, not round its far row, got ${whole.stand}`)

  // once the first row stands, the rest is built from beside the rows' ends: not on the built row, not inside the site
  const firstRowBuilt = (x, y, z) => y < 0 || (x === -5 && y === 0)
  const rest = planStandpoint({ cells: SITE.slice(4), from: new Vec3(-1.5, 0, 1.5), solid: firstRowBuilt, avoid: SITE })
  assert.equal(rest.covers, 8)
  assert.equal(rest.stand.y, 0, `nobody stands on what it built, got ${rest.stand}`)
  assert.ok(!SITE.some(c => c.x === rest.stand.x && c.z === rest.stand.z), `nobody stands in the site, got ${rest.stand}`)

  const blocked = planStandpoint({ cells: [new Vec3(0, 0, 0)], from, solid: (x, y, z) => y !== 0 || x !== 0 || z !== 0 })
  assert.equal(blocked.covers, 0, 'a cell no standpoint sees is reported, not guessed')
})

// ---------- the skills on the embedded server ----------

let arena
let callId = 0
const STATIONS = [
  { name: 'chest', kind: 'chest', pos: [-4, 0, -2], cells: [] },
  { name: 'site', kind: 'site', pos: [-5, 0, 0], cells: SITE.map(c => [c.x, c.y, c.z]) }
]
const spec = (inventories, containers = {}, positions = { agent_a: [-1, 0, 0], agent_b: [5, 0, 0] }) =>
  ({ agents: ['agent_a', 'agent_b'], stations: STATIONS, positions, inventories, containers })

async function run (actor, op, args) {
  const events = await arena.world.execute(arena.world.checkCall({ id: `s${++callId}`, actor, op, args }))
  assert.equal(events[0].ok, true, `${op} failed: ${events[0].reason}`)
  return events
}

/** Count the pathfinder walks a bot starts. */
function countWalks (bot) {
  const walks = []
  const goto = bot.pathfinder.goto
  bot.pathfinder.goto = goal => { walks.push(goal); return goto(goal) }
  return { walks, restore: () => { bot.pathfinder.goto = goto } }
}

before(async () => { arena = await startArena({ cookTicks: 2 }) })
after(async () => { await arena.close() })

test('a chest in reach is used where the bot stands; a give comes within toss range of a receiver who stands still', async () => {
  await arena.world.reset(spec({}, { chest: { oak_planks: 4 } }))
  const a = arena.a
  const b = arena.b
  const start = a.entity.position.clone()
  const { walks, restore } = countWalks(a)
  const [gone] = await run('agent_a', 'goto', { station: 'chest' })
  const [withdrawn] = await run('agent_a', 'withdraw', { station: 'chest', item: 'oak_planks', count: 4 })
  assert.equal(walks.length, 0, 'a chest 3.6 blocks away is within reach')
  assert.ok(a.entity.position.distanceTo(start) < 0.01)
  assert.deepEqual(gone.actions, { walks: 0, window_clicks: 0, tosses: 0, placements: 0 })
  assert.ok(withdrawn.actions.window_clicks >= 2, `a withdraw picks the stack up and puts it down: ${JSON.stringify(withdrawn.actions)}`)
  assert.deepEqual({ ...withdrawn.actions, window_clicks: 0 }, { walks: 0, window_clicks: 0, tosses: 0, placements: 0 })

  const receiverAt = b.entity.position.clone()
  const [[given], received] = await Promise.all([
    run('agent_a', 'give', { to: 'agent_b', item: 'oak_planks', count: 4 }),
    run('agent_b', 'await_handoff', { from: 'agent_a', item: 'oak_planks', count: 4 })
  ])
  restore()
  assert.equal(received[1].kind, 'handoff')
  assert.equal(walks.length, 1)
  assert.deepEqual(given.actions, { walks: 1, window_clicks: 0, tosses: 1, placements: 0 }, 'the toss\'s clicks are the toss')
  assert.deepEqual(received.map(e => e.actions), [{ walks: 0, window_clicks: 0, tosses: 0, placements: 0 }, { walks: 0, window_clicks: 0, tosses: 0, placements: 0 }])
  assert.deepEqual(received[1].data, {
    from: 'agent_a',
    to: 'agent_b',
    item: 'oak_planks',
    count: 4,
    inventories_before: { agent_a: { oak_planks: 4 }, agent_b: {} },
    inventories_after: { agent_a: {}, agent_b: { oak_planks: 4 } }
  })
  assert.ok(!('inventories_before' in received[0].data), 'the snapshots belong to the handoff event')
  assert.ok(b.entity.position.distanceTo(receiverAt) < 0.01, 'the receiver did not move')
  const gap = Math.hypot(a.entity.position.x - b.entity.position.x, a.entity.position.z - b.entity.position.z)
  assert.ok(gap > 1.5 && gap < 4, `the giver stopped within toss range, not next to the receiver (gap ${gap.toFixed(2)})`)
  const truth = await arena.world.observe()
  assert.deepEqual(truth.inventories, { agent_a: {}, agent_b: { oak_planks: 4 } })
})

test("a toss's items that landed out of the receiver's reach are walked to, and the handoff completes", async () => {
  await arena.world.reset(spec({ agent_a: { oak_planks: 4 } }, {}, { agent_a: [0, 0, 1], agent_b: [2, 0, 0] }))
  const before = arena.world.inventories()
  // agent_a throws away from agent_b (west), as a toss on a look the server had not taken yet would
  const away = arena.a.entity.position.offset(-5, 1.6, 0)
  await arena.a.lookAt(away, true)
  const giver = arena.player(arena.world.username('agent_a'))
  await waitFor(() => arena.api.tossDirection(giver).x < -0.9, SETTLE_MS, 'the server to have agent_a looking west')
  const toss = arena.world.noteToss('agent_a', 'agent_b', 'oak_planks', 4, before)
  await arena.a.toss(arena.serv.registry.itemsByName.oak_planks.id, null, 4)
  arena.world.tossThrown(toss)
  const lying = () => arena.world.arena.dropsOf('agent_a', 'agent_b', 'oak_planks')
  await waitFor(() => lying().length === 1 && lying()[0].x < -1, SETTLE_MS, 'the items to land west of agent_a')
  const receiverAt = arena.b.entity.position.clone()
  assert.ok(lying()[0].distanceTo(receiverAt) > 3, 'the items lie out of the receiver\'s pickup range')

  const received = await run('agent_b', 'await_handoff', { from: 'agent_a', item: 'oak_planks', count: 4 })
  assert.equal(received[1].kind, 'handoff')
  assert.deepEqual(received[0].actions, { walks: 1, window_clicks: 0, tosses: 0, placements: 0 }, 'one walk, onto the items')
  assert.deepEqual([received[1].data.inventories_before, received[1].data.inventories_after],
    [{ agent_a: { oak_planks: 4 }, agent_b: {} }, { agent_a: {}, agent_b: { oak_planks: 4 } }])
  assert.ok(arena.b.entity.position.distanceTo(receiverAt) > 1.5, 'the receiver moved to the items')
  assert.ok(arena.lines.some(l => l.includes('agent_b walks to the oak_planks agent_a tossed')))
  assert.deepEqual(lying(), [])
})

test('a site is filled in fill order from the side the bot comes from; a near row without walking', async () => {
  await arena.world.reset(spec({ agent_a: { cobblestone: 16 } }, {}, { agent_a: [-2, 0, 1], agent_b: [5, 0, 0] }))
  const { walks, restore } = countWalks(arena.a)
  try {
    const first = await run('agent_a', 'place', { site: 'site', item: 'cobblestone', count: 4 })
    assert.deepEqual(first[0].data.cells, SITE.slice(0, 4).map(c => [c.x, c.y, c.z]))
    assert.equal(walks.length, 0, 'the first row is in reach from beside it')
    assert.equal(first[0].actions.placements, 4)
    assert.equal(first[0].actions.walks, 0)
    const rest = await run('agent_a', 'place', { site: 'site', item: 'cobblestone', count: 8 })
    assert.deepEqual(rest[0].data.cells, SITE.slice(4).map(c => [c.x, c.y, c.z]))
    assert.equal(walks.length, 1, 'one walk, to beside the rows\' ends, for the two rows the built one hides')
    assert.equal(rest[0].actions.placements, 8)
    assert.equal(rest[0].actions.walks, 1)
    assert.equal(rest[0].actions.tosses, 0)
  } finally {
    restore()
  }
  let truth = await arena.world.observe()
  assert.equal(truth.sites.site.length, 12)
  assert.ok(truth.sites.site.every(c => c[3] === 'cobblestone'))
  assert.deepEqual(truth.inventories.agent_a, { cobblestone: 4 })

  // the whole site at once: one short walk, and the bot stays on its side of the site
  await arena.world.reset(spec({ agent_a: { cobblestone: 12 } }, {}, { agent_a: [-1, 0, 1], agent_b: [5, 0, 0] }))
  const whole = await run('agent_a', 'place', { site: 'site', item: 'cobblestone', count: 12 })
  assert.deepEqual(whole[0].data.cells, SITE.map(c => [c.x, c.y, c.z]), 'the event lists the cells in fill order')
  assert.equal(whole[0].actions.walks, 1)
  assert.ok(arena.a.entity.position.x > -5, `built from the near side, ended at ${arena.a.entity.position}`)
  truth = await arena.world.observe()
  assert.equal(truth.sites.site.length, 12)
})
