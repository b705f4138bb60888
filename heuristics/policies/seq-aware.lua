-- seq-aware: the sequence-aware split policy of Llopart Font, Hernando and España-Bonet,
-- "Sequence-Aware Split Heuristic to Mitigate SM Underutilization in FlashAttention-3
-- Low-Head-Count Decoding", arXiv:2604.00028 (v1, March 2026), its conservative C++ policy
-- (the paper's Figure 2): keep FlashAttention-3's decision for shorter contexts and for
-- saturated cases, and override the low-tile bucket nblk = 4, where FA3's `nblk <= 4`
-- guard returns 1 split, with 3 splits.
--
-- Only the paper's abstract and figure captions could be read here, not its code; this is
-- that description implemented on top of fa3.lua, whose FA3 part it repeats unchanged
-- (Dao-AILab/flash-attention hopper/flash_api.cpp @ 0e79d711, hopper/tile_size.h @ 8a802150,
-- hopper/heuristics.h @ 6d21ae21; same choices, see fa3.lua). Reading of the description:
--   * the bucket counts 128-key tiles, ceil(seqlen_k / 128) = 4 (Lk in 385..512): the
--     paper's grid (Lk = 128, 256, 384, 512 as nblk = 1..4) and its headline case (B = 1,
--     Lk = 512, Hkv = 1: FA3 keeps one split, 3 splits are faster) both say so. FA3's own
--     kBlockN is 176 for a contiguous D = 128 cache, where Lk = 512 is 3 of FA3's tiles but
--     still the paper's nblk = 4 case;
--   * "saturated" is FA3's own test, total_mblocks >= 0.8 * SMs, and the override applies
--     only where FA3's `nblk <= 4` guard (with FA3's own tiles) chose one split: at D = 256
--     FA3's 80-key tiles already split Lk = 512, and that decision stays;
--   * with 3 splits FA3 packs GQA (get_pack_gqa), so pack_gqa follows as in fa3.lua.

local function ceil_div(a, b) return (a + b - 1) // b end

-- x rounded to the nearest float32 (ties to even). Every operand here is a float32 value
-- or a small integer, so one float64 operation followed by f32() equals the float32
-- operation (float64 has more than 2 * 24 + 2 bits). Scaling by powers of two is exact.
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

-- FA3 compiles kernels for head dims 64, 96, 128, 192, 256 and rounds up to the next.
local function round_up_headdim(d)
  if d <= 64 then return 64 end
  if d <= 96 then return 96 end
  if d <= 128 then return 128 end
  if d <= 192 then return 192 end
  return 256
end

-- tile_size_fwd_sm90 for V head dim = D, no window, no softcap, K-major V:
-- returns kBlockM (query rows per CTA) and kBlockN (KV rows per tile).
local function tile_size(d, causal, elem_bytes, paged_non_tma)
  if elem_bytes == 2 then
    if d <= 64 then return 192, (causal or paged_non_tma) and 128 or 192 end
    if d <= 96 then return 192, paged_non_tma and 128 or 144 end
    if d <= 128 then return 128, (causal or paged_non_tma) and 128 or 176 end
    if d <= 192 then return 128, paged_non_tma and 96 or 112 end  -- dv = 192 > 128
    return 128, 80
  end
  -- fp8 (e4m3)
  if d <= 64 then return 192, 160 end
  if d <= 96 then return 192, 128 end
  if d <= 128 then return 128, paged_non_tma and 160 or 224 end
  if d <= 192 then return 128, 160 end
  return 128, 128
end

-- should_pack_gqa (not varlen): pack when it wastes clearly less of the M tile.
-- (FA3 divides in float32; for Lq <= 16 and qpk <= 4096 float64 decides the same.)
local function should_pack_gqa(seqlen_q, qpk, block_m)
  local function round_up(a, b) return ceil_div(a, b) * b end
  local nopack = seqlen_q / round_up(seqlen_q, block_m)
  local pack = seqlen_q * qpk / round_up(seqlen_q * qpk, block_m)
  return nopack < 0.9 * pack
end

-- Wave efficiency of s splits: how much of the last wave of CTAs the SMs spend working.
local function wave_efficiency(ctas, s, num_sms)
  local waves = ctas * s / num_sms
  return waves / math.ceil(waves)
end

-- The same as FA3 computes it, in float32.
local function wave_efficiency_f32(ctas, s, num_sms)
  local waves = f32(ctas * s / num_sms)
  return f32(waves / math.ceil(waves))
end

-- The smallest split count whose efficiency reaches 85% of the best, decided as in
-- float32. Exact ties with 0.85 * best are common, and there float32 rounding decides;
-- float64 values are within 1e-6 of the float32 ones, so only values that close to the
-- best or to the threshold are recomputed in float32 (the rest compare the same).
local function smallest_within_85_percent(ctas, num_sms, max_splits)
  local eff, best = {}, 0.0
  for s = 1, max_splits do
    eff[s] = wave_efficiency(ctas, s, num_sms)
    best = math.max(best, eff[s])
  end
  local best32 = 0.0
  for s = 1, max_splits do
    if eff[s] > best - 1e-6 then best32 = math.max(best32, wave_efficiency_f32(ctas, s, num_sms)) end
  end
  local threshold = 0.85 * best32
  for s = 1, max_splits do
    local e = eff[s]
    if math.abs(e - threshold) < 1e-6 then e = wave_efficiency_f32(ctas, s, num_sms) end
    if e >= threshold then return s end
  end
  return 1
end

-- num_splits_heuristic: fill the SMs, but only split when the KV is long enough.
local function num_splits_heuristic(total_mblocks, num_sms, nblk, num_m_blocks,
                                    size_one_kv_head, causal, max_splits)
  -- FA3 compares with 0.8f * SMs in float32; for whole CTA counts float64 is the same.
  if total_mblocks >= 0.8 * num_sms then
    -- Enough CTAs already. Split only when one KV head overflows an assumed 50 MiB L2
    -- and enough query rows read it (never for causal).
    local size_l2 = 50 * 1024 * 1024
    if size_one_kv_head > size_l2 and num_m_blocks >= num_sms * 2 and not causal then
      return math.min(ceil_div(size_one_kv_head, size_l2), max_splits)
    end
    return 1
  end
  if nblk <= 4 then return 1 end  -- too few KV tiles to be worth a combine
  return smallest_within_85_percent(total_mblocks, num_sms, math.min(max_splits, num_sms, nblk))
end

function dispatch(s, hw)
  local d = s.head_dim
  local paged = s.page_size > 0
  local elem_bytes = (s.dtype == "fp8") and 1 or 2
  local qpk = s.h_q // s.h_kv
  local seqlen_k = paged and ceil_div(s.seqlen_k, s.page_size) * s.page_size or s.seqlen_k

  -- With one query token causal masking is a no-op; FA3 drops it (choosing the non-causal
  -- tile) except at head dim (64, 128] with a paged cache, where it keeps kBlockN = 128.
  local causal = s.causal
  if s.seqlen_q == 1 and (d <= 64 or d > 128 or not paged) then causal = false end

  -- get_pagedkv_tma: TMA loads of pages only when a page holds whole KV tiles and the
  -- packed query rows exceed one M tile.
  local dr = round_up_headdim(d)
  local pagedkv_tma = false
  if paged then
    local bm, bn = tile_size(dr, causal, elem_bytes, false)
    pagedkv_tma = s.page_size % bn == 0 and s.seqlen_q * qpk > bm
  end
  local paged_non_tma = paged and not pagedkv_tma
  local block_m, block_n = tile_size(dr, causal, elem_bytes, paged_non_tma)

  -- get_num_splits: query rows are counted packed (FA3 always packs GQA when it splits).
  local num_sms = hw.num_sms  -- minus sm_margin, which is 0
  local nblk = ceil_div(seqlen_k, block_n)
  local num_m_blocks = ceil_div(s.seqlen_q * qpk, block_m)
  local size_one_kv_head = seqlen_k * (d + d) * elem_bytes
  local total_mblocks = s.batch * s.h_kv * num_m_blocks
  local num_splits = num_splits_heuristic(total_mblocks, num_sms, nblk, num_m_blocks,
                                          size_one_kv_head, causal, 128)

  -- The paper's override: where FA3's short-KV guard (its nblk <= 4) kept one split on an
  -- unsaturated GPU, the 4-tile bucket of 128-key tiles gets 3 splits.
  local saturated = total_mblocks >= 0.8 * num_sms
  local guarded = not saturated and nblk <= 4
  if guarded and ceil_div(seqlen_k, 128) == 4 then num_splits = 3 end

  -- get_pack_gqa: always packed when split or paged without TMA; never for MHA.
  local pack_gqa
  if paged_non_tma or num_splits > 1 then
    pack_gqa = true
  elseif qpk == 1 then
    pack_gqa = false
  else
    pack_gqa = should_pack_gqa(s.seqlen_q, qpk, block_m)
  end

  return { num_splits = num_splits, pack_gqa = pack_gqa, sm_margin = 0 }
end
