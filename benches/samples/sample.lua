--- Inventory and crafting helpers for the game client.
-- @module inventory

local Inventory = {}
Inventory.__index = Inventory

local DEFAULT_SLOTS = 24
local MAX_STACK = 99

--- Item definitions keyed by id.
local ITEMS = {
  wood   = { name = "Wood Plank", stack = 50, weight = 0.5 },
  stone  = { name = "Stone", stack = 50, weight = 1.2 },
  iron   = { name = "Iron Ingot", stack = 20, weight = 2.0 },
  sword  = { name = "Iron Sword", stack = 1, weight = 4.5, kind = "weapon" },
  potion = { name = 'Health Potion', stack = 10, weight = 0.3, heals = 25 },
}

local RECIPES = {
  sword = { iron = 3, wood = 1 },
  wall  = { stone = 4, wood = 2 },
}

local function clamp(value, lo, hi)
  if value < lo then return lo end
  if value > hi then return hi end
  return value
end

--- Create a new inventory.
-- @tparam[opt=24] number slots number of slots
-- @treturn Inventory
function Inventory.new(slots)
  local self = setmetatable({}, Inventory)
  self.slots = slots or DEFAULT_SLOTS
  self.items = {}
  self.listeners = {}
  return self
end

function Inventory:on_change(fn)
  self.listeners[#self.listeners + 1] = fn
end

function Inventory:_emit(id, delta)
  for _, fn in ipairs(self.listeners) do
    local ok, err = pcall(fn, id, delta, self:count(id))
    if not ok then
      print(string.format("listener failed for %s: %s", id, tostring(err)))
    end
  end
end

function Inventory:count(id)
  local total = 0
  for _, stack in ipairs(self.items) do
    if stack.id == id then
      total = total + stack.qty
    end
  end
  return total
end

function Inventory:used_slots()
  return #self.items
end

--- Add items, filling existing stacks first.
-- @return the number of items that did not fit
function Inventory:add(id, qty)
  local def = ITEMS[id]
  assert(def, "unknown item: " .. tostring(id))
  local limit = math.min(def.stack, MAX_STACK)
  local remaining = qty

  for _, stack in ipairs(self.items) do
    if remaining == 0 then break end
    if stack.id == id and stack.qty < limit then
      local take = math.min(limit - stack.qty, remaining)
      stack.qty = stack.qty + take
      remaining = remaining - take
    end
  end

  while remaining > 0 and #self.items < self.slots do
    local take = math.min(limit, remaining)
    table.insert(self.items, { id = id, qty = take })
    remaining = remaining - take
  end

  if qty - remaining > 0 then
    self:_emit(id, qty - remaining)
  end
  return remaining
end

function Inventory:remove(id, qty)
  if self:count(id) < qty then
    return false, ("not enough %s (need %d)"):format(ITEMS[id].name, qty)
  end
  local left = qty
  for i = #self.items, 1, -1 do
    local stack = self.items[i]
    if stack.id == id then
      local take = math.min(stack.qty, left)
      stack.qty = stack.qty - take
      left = left - take
      if stack.qty == 0 then
        table.remove(self.items, i)
      end
      if left == 0 then break end
    end
  end
  self:_emit(id, -qty)
  return true
end

function Inventory:weight()
  local w = 0
  for _, stack in ipairs(self.items) do
    w = w + ITEMS[stack.id].weight * stack.qty
  end
  return math.floor(w * 10 + 0.5) / 10
end

--[[
  Crafting consumes the ingredients listed in RECIPES. The check is done
  up front so a failed craft never leaves the inventory half-modified.
]]
function Inventory:craft(recipe_id, times)
  times = clamp(times or 1, 1, 10)
  local recipe = RECIPES[recipe_id]
  if not recipe then
    return false, "no such recipe"
  end
  for ingredient, amount in pairs(recipe) do
    if self:count(ingredient) < amount * times then
      return false, "missing " .. ingredient
    end
  end
  for ingredient, amount in pairs(recipe) do
    self:remove(ingredient, amount * times)
  end
  if ITEMS[recipe_id] then
    self:add(recipe_id, times)
  end
  return true
end

function Inventory:__tostring()
  local parts = {}
  for i, stack in ipairs(self.items) do
    parts[#parts + 1] = string.format("%2d: %-14s x%d", i, ITEMS[stack.id].name, stack.qty)
  end
  return table.concat(parts, "\n") .. [[

-- end of inventory --]]
end

-- Register the module explicitly so it can also be loaded via dofile().
package.loaded["inventory"] = Inventory
