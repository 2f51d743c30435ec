'use strict'
// The rule tables shared with the Python package (rules.js): the op table and the skills agree, the furnace
// plugin smelts by recipes.json, and every rule of recipes.json agrees with minecraft-data 1.21.4, whose
// recipes the plugin's crafting grid computes its results from.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { RULES, RULES_DIR } = require('./helpers')
const { loadRules, parseLimits, parseOps, RulesError } = require('../src/rules')
const { SKILLS, checkSkillTable } = require('../src/skills')
const { smeltingTable } = require('../src/plugin/furnace')
const { trim } = require('../src/plugin/crafting')
const registry = require('prismarine-registry')('1.21.4')

const raw = JSON.parse(fs.readFileSync(path.join(RULES_DIR, 'recipes.json'), 'utf8'))
const nameOf = id => registry.items[id].name

test('every op of skill_ops.json has a skill and every skill an op', () => {
  assert.deepEqual(Object.keys(SKILLS).sort(), Object.keys(RULES.ops).sort())
  assert.doesNotThrow(() => checkSkillTable(RULES.ops))
  assert.throws(() => checkSkillTable({ ...RULES.ops, fly: {} }), /skill_ops.json\) and src\/skills.js disagree: no skill runs fly/)
})

test('the furnace plugin smelts exactly the smelting and fuel rules of recipes.json', () => {
  const table = smeltingTable(RULES.recipes)
  assert.deepEqual(table.smelting, raw.smelting)
  assert.deepEqual(table.fuelTicks, Object.fromEntries(Object.entries(raw.fuels).map(([item, smelts]) => [item, smelts * 200])))
})

test('a missing or malformed rules directory fails with a message that says what to pass', () => {
  assert.throws(() => loadRules(''), err => err instanceof RulesError && /no rules directory/.test(err.message))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rules-'))
  assert.throws(() => loadRules(dir), /limits.json cannot be read \(ENOENT\); --rules must name the directory of limits.json, skill_ops.json and recipes.json/)
  fs.copyFileSync(path.join(RULES_DIR, 'limits.json'), path.join(dir, 'limits.json'))
  assert.throws(() => loadRules(dir), /skill_ops.json cannot be read \(ENOENT\)/)
  fs.copyFileSync(path.join(RULES_DIR, 'skill_ops.json'), path.join(dir, 'skill_ops.json'))
  fs.writeFileSync(path.join(dir, 'recipes.json'), JSON.stringify({ ...raw, fuels: { coal: 1 / 3 } }))
  assert.throws(() => loadRules(dir), /fuels.coal must be the items smelted per fuel item/)
  fs.rmSync(dir, { recursive: true })
})

test('the op table takes its bounds from limits.json, the numbers the Python contract rejects agent input by', () => {
  const limits = JSON.parse(fs.readFileSync(path.join(RULES_DIR, 'limits.json'), 'utf8')).args
  assert.deepEqual([RULES.ops.withdraw.count.min, RULES.ops.withdraw.count.max], [limits.count.min, limits.count.max])
  assert.deepEqual([RULES.ops.wait.ticks.min, RULES.ops.wait.ticks.max], [limits.ticks.min, limits.ticks.max])
  assert.equal(RULES.ops.goto.station.max, limits.name_chars.max)
  assert.equal(RULES.ops.craft.station.min, 0) // the grid's own min overrides the limit's
  const ops = JSON.parse(fs.readFileSync(path.join(RULES_DIR, 'skill_ops.json'), 'utf8'))
  assert.equal(parseOps(ops, 'ops', { args: { ...RULES.limits.args, count: { min: 1, max: 9 } } }).give.count.max, 9)
  ops.types.count.limit = 'counts'
  assert.throws(() => parseOps(ops, 'ops', RULES.limits), /ops: types.count.limit "counts" is not a limit of limits.json's args; limits are count, /)
  assert.throws(() => parseLimits({ args: { count: { min: 3, max: 1 } } }), /args.count needs integers 0 <= min <= max/)
})

/** The ingredient multiset of a minecraft-data recipe variant and whether it fits the 2x2 grid. */
function shapeOf (recipe) {
  const inputs = {}
  let fits
  if (recipe.inShape) {
    const rows = trim(recipe.inShape.map(row => row.map(v => (v && typeof v === 'object' ? v.id : v))))
    for (const row of rows) for (const id of row) if (id != null) inputs[nameOf(id)] = (inputs[nameOf(id)] || 0) + 1
    fits = rows.length <= 2 && rows.every(row => row.length <= 2)
  } else {
    for (const v of recipe.ingredients) {
      const name = nameOf(v && typeof v === 'object' ? v.id : v)
      inputs[name] = (inputs[name] || 0) + 1
    }
    fits = recipe.ingredients.length <= 4
  }
  return { inputs, fits }
}

test('every crafting recipe of recipes.json is a minecraft-data recipe: output count, inputs and grid size', () => {
  for (const [output, rule] of Object.entries(raw.crafting)) {
    const item = registry.itemsByName[output]
    assert.ok(item, `${output} is not a minecraft-data item`)
    const variants = (registry.recipes[item.id] || []).map(r => ({ count: r.result.count, ...shapeOf(r) }))
    const match = variants.find(v => v.count === rule.count && JSON.stringify(Object.entries(v.inputs).sort()) === JSON.stringify(Object.entries(rule.inputs).sort()))
    assert.ok(match, `${output}: no minecraft-data recipe makes ${rule.count} from ${JSON.stringify(rule.inputs)}; ` +
      `minecraft-data has ${JSON.stringify(variants.map(v => [v.count, v.inputs]))}`)
    assert.equal(!match.fits, rule.table, `${output}: table must be ${!match.fits} (the shape ${match.fits ? 'fits' : 'does not fit'} the 2x2 grid)`)
  }
})

test('smelting, fuels, blocks and stack sizes of recipes.json name minecraft-data items and blocks', () => {
  const names = [...Object.keys(raw.smelting), ...Object.values(raw.smelting), ...Object.keys(raw.fuels), ...raw.blocks, ...Object.keys(raw.stack)]
  for (const name of names) assert.ok(registry.itemsByName[name], `${name} is not a minecraft-data item`)
  for (const name of raw.blocks) assert.ok(registry.blocksByName[name], `${name} places no block of the same name`)
  const listed = new Set([...Object.keys(raw.crafting), ...Object.values(raw.smelting), ...Object.keys(raw.fuels), ...raw.blocks])
  for (const name of listed) {
    assert.equal(registry.itemsByName[name].stackSize, raw.stack[name] ?? 64, `stack size of ${name}`)
  }
})
