'use strict'
// Chat commands: a numeric /give (stock flying-squid keeps the count as a string, so 4 + 3 = "43",
// and ignores stack sizes), vanilla's /clear and /kill @e[type=item], and /sync, the ordering barrier.

const { UserError } = require('flying-squid')

const NUM = '(-?\\d+(?:\\.\\d+)?)'
/** `@e[type=minecraft:item,x=..,y=..,z=..,dx=..,dy=..,dz=..]`, the form an external-arena reset sends. */
const ITEMS_IN_VOLUME = new RegExp(`^@e\\[type=(?:minecraft:)?item,x=${NUM},y=${NUM},z=${NUM},dx=${NUM},dy=${NUM},dz=${NUM}\\]$`)

function server (serv, api) {
  serv.once('asap', () => {
    const give = serv.commands.uniqueHash.give
    const parse = give.params.parse
    give.params.parse = (args, ctx) => {
      const parsed = parse(args, ctx)
      if (!parsed) return parsed
      const count = Number.parseInt(parsed.count, 10)
      if (!Number.isInteger(count) || count < 1) throw new UserError('Count must be a positive integer')
      return { ...parsed, count }
    }
    give.params.action = ({ players, item, count }) => {
      const data = serv.registry.itemsByName[item]
      if (!data) throw new UserError(`Unknown item '${item}'`)
      for (const player of players) {
        const left = api.addToInventory(player, new api.Item(data.id, count))
        api.log('edit', `give ${player.username} ${item} ${count - left}${left ? ` (${left} did not fit)` : ''}`)
      }
    }
  })

  // Vanilla commands an external-server reset sends, so that this server can stand in for the official
  // one: `/clear <player>` (inventory and cursor) and `/kill @e[type=item]` (every dropped item).
  serv.commands.add({
    base: 'clear',
    info: 'clear a player\'s inventory',
    usage: '/clear [player]',
    op: true,
    parse (str) { return str === '' || /^[A-Za-z0-9_@]{1,16}$/.test(str) ? str : false },
    action (target, ctx) {
      const players = target ? serv.getPlayers(target, ctx.player) : (ctx.player ? [ctx.player] : [])
      if (!players.length) throw new UserError('Player not found')
      for (const player of players) {
        if (player.gcWindow) api.closeWindow(player)
        api.clearInventory(player)
        api.log('edit', `clear ${player.username}`)
      }
    }
  })
  serv.once('asap', () => {
    const kill = serv.commands.uniqueHash.kill
    const action = kill.params.action
    kill.params.action = (sel, ctx) => {
      if (/^@e\[type=(minecraft:)?item\]$/.test(sel)) {
        api.log('edit', `kill dropped items: ${api.clearDrops()}`)
        return
      }
      // vanilla's volume selector: items whose position lies in [x, x + dx] x [y, y + dy] x [z, z + dz]
      const box = ITEMS_IN_VOLUME.exec(sel)
      if (box) {
        const [x, y, z, dx, dy, dz] = box.slice(1).map(Number)
        const within = (v, lo, d) => v >= Math.min(lo, lo + d) && v <= Math.max(lo, lo + d) + 1
        const n = api.clearDrops(p => within(p.x, x, dx) && within(p.y, y, dy) && within(p.z, z, dz))
        api.log('edit', `kill dropped items in ${x} ${y} ${z} +${dx} ${dy} ${dz}: ${n}`)
        return
      }
      return action(sel, ctx)
    }
  })

  // Packets of one connection are handled in order, so the reply to `/sync <token>` proves that every
  // earlier packet of that client (window clicks included) has been applied. mineflayer does not wait
  // for the server after chest or furnace clicks; ground truth is read only after this barrier.
  serv.commands.add({
    base: 'sync',
    info: 'ordering barrier: replies once earlier packets of this client are applied',
    usage: '/sync <token>',
    parse (str) { return /^[A-Za-z0-9_-]{1,64}$/.test(str) ? str : false },
    action (token) { return 'sync:' + token }
  })
}

module.exports = { server }
