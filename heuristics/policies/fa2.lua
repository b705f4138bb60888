-- fa2: FlashAttention-2's split-KV choice for decode (flash_attn_with_kvcache; PyTorch's
-- flash SDPA backend carries a copy of the same heuristic).
--
-- Source: github.com/Dao-AILab/flash-attention, csrc/flash_attn/flash_api.cpp
-- (FlashAttention-2 v2.5 and later), read at commit 00979f57acf503b0b080ff08ada0007080074649:
--   mha_fwd_kvcache       seqlen_q == 1 turns causal off; then `seqlenq_ngroups_swapped`:
--                         with one query token and Hq > Hkv, q is viewed as
--                         [B, qpk, Hkv, D], i.e. the qpk query heads of a KV head become
--                         the query rows of one CTA (GQA packing in all but name);
--                         a paged cache's seqlen_k is the page table's capacity
--   set_params_splitkv    block_n = 256 for D <= 64, 128 for D <= 128, 64 above;
--                         num_m_blocks = ceil(seqlen_q / 64); the SM count doubled ("128
--                         threads per block": two CTAs per SM); at most 128 splits
--   num_splits_heuristic  one split once batch * heads * m_blocks >= 0.8 * (2 * SMs); no
--                         nblk guard; split counts that give the same KV blocks per split
--                         as the count below them are ineligible (skipped); then the
--                         smallest eligible count within 85% of the best wave efficiency
-- Re-expressed, not copied. FA2 computes efficiencies in float32; where that matters (the
-- 0.85 threshold is often met exactly, and float64 would choose otherwise) f32() rounds
-- exactly as float32 does.
-- Not modelled: FA2 refuses fp8, head dims above 256 and pages that are not a multiple of
-- 256 rows; the policy still answers for them with the same rules.

local function ceil_div(a, b) return (a + b - 1) // b end

-- x rounded to the nearest float32 (ties to even); see fa3.lua.
local function f32(x)
  if x == 0 then return 0.0 end
  local scale = 1.0
  while x * scale < 32768 do scale = scale * 256 end
  while x * scale >= 16777216 do scale = scale / 2 end
  while x * scale < 8388608 do scale = scale * 2 end
  local q = x * scale  -- in [2^23, 2^24): one unit here is one float32 ulp
  local r = q // 1
  local rest = q - r
  if rest > 0.5 or (rest == 0.5 and r % 2 == 1) then r = r + 1 end
  return r / scale
end

-- FA2's split kernel streams KV in blocks of this many rows.
local function fa2_block_n(head_dim)
  if head_dim <= 64 then return 256 end
  if head_dim <= 128 then return 128 end
  return 64
end

-- 12 splits of 64 blocks give 6 blocks per split, like 11 splits (the last split empty):
-- a count is eligible only if it changes the blocks per split.
local function eligible(num_splits, nblk)
  return num_splits == 1 or ceil_div(nblk, num_splits) ~= ceil_div(nblk, num_splits - 1)
end

-- Wave efficiency of s splits: how much of the last wave of CTAs the slots spend working.
local function wave_efficiency(ctas, s, slots)
  local waves = ctas * s / slots
  return waves / math.ceil(waves)
end

-- The same as FA2 computes it, in float32.
local function wave_efficiency_f32(ctas, s, slots)
  local waves = f32(ctas * s / slots)
  return f32(waves / math.ceil(waves))
end

local function num_splits_heuristic(ctas, slots, nblk, max_splits)
  -- FA2 compares with 0.8f * slots in float32; for whole CTA counts float64 is the same.
  if ctas >= 0.8 * slots then return 1 end
  max_splits = math.min(max_splits, slots, nblk)
  -- The smallest eligible count within 85% of the best, decided as in float32: values
  -- within 1e-6 of the best or of the threshold are recomputed in float32 (exact ties
  -- with 0.85 * best are common), the rest compare the same in float64.
  local eff, best = {}, 0.0
  for s = 1, max_splits do
    if eligible(s, nblk) then
      eff[s] = wave_efficiency(ctas, s, slots)
      best = math.max(best, eff[s])
    end
  end
  local best32 = 0.0
  for s = 1, max_splits do
    if eff[s] ~= nil and eff[s] > best - 1e-6 then
      best32 = math.max(best32, wave_efficiency_f32(ctas, s, slots))
    end
  end
  local threshold = 0.85 * best32
  for s = 1, max_splits do
    local e = eff[s]
    if e ~= nil then
      if math.abs(e - threshold) < 1e-6 then e = wave_efficiency_f32(ctas, s, slots) end
      if e >= threshold then return s end
    end
  end
  return 1
end

function dispatch(s, hw)
  local paged = s.page_size > 0
  local seqlen_k = paged and ceil_div(s.seqlen_k, s.page_size) * s.page_size or s.seqlen_k

  -- seqlenq_ngroups_swapped: one query token of a GQA model becomes qpk rows of one head.
  local swapped = s.seqlen_q == 1 and s.h_q > s.h_kv
  local rows = swapped and (s.h_q // s.h_kv) or s.seqlen_q
  local heads = swapped and s.h_kv or s.h_q

  local nblk = ceil_div(seqlen_k, fa2_block_n(s.head_dim))
  local num_m_blocks = ceil_div(rows, 64)
  local num_splits = num_splits_heuristic(s.batch * heads * num_m_blocks, hw.num_sms * 2, nblk, 128)

  return { num_splits = num_splits, pack_gqa = swapped, sm_margin = 0 }
end
