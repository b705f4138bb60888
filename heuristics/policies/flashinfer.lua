-- flashinfer: FlashInfer's balanced split-KV plan for batch decode.
--
-- Source: github.com/flashinfer-ai/flashinfer, read at commit
-- 24fd9fc7a944723897cc46a60bf39703ab2813a6:
--   include/flashinfer/attention/scheduler.cuh
--     BatchDecodeWithPagedKVCacheWorkEstimationDispatched  (CUDA-core decode kernel)
--       max_grid_size = CTAs per SM of the decode kernel (cudaOccupancyMaxActive-
--       BlocksPerMultiprocessor) * SMs; gdy = Hkv; no split when batch * Hkv fills it;
--       otherwise PartitionPagedKVCacheBinarySearchMinNumPagePerBatch: the smallest chunk
--       (in pages, at least max(128 / page_size, 1)) such that all chunks * Hkv fit
--     PrefillPlan / PrefillSplitQOKVIndptr / PrefillBinarySearchKVChunkSize  (tensor-core
--       decode, FlashInfer's path for group sizes its decode kernel lacks and for more
--       than one query token): 2 CTAs per SM, fixed; chunks counted per query tile
--   include/flashinfer/utils.cuh  DISPATCH_GQA_GROUP_SIZE (1, 2, 3, 4, 8),
--     DISPATCH_COMPUTE_CAP_DECODE_NUM_STAGES_SMEM (2 stages from sm80), FA2DetermineCtaTileQ
-- Re-expressed, not copied. The binary search is replaced by its closed form: with at most
-- k chunks per request, the smallest chunk is ceil(pages / k), raised to the minimum.
--
-- Occupancy (CTAs per SM of the decode kernel). FlashInfer asks the CUDA runtime; here it
-- is derived from the kernel's launch configuration as FlashInfer builds it (vec_size,
-- bdx = D / vec_size, bdy = group size, 128 threads or more, its shared-memory formula)
-- against the SM's limits for threads, shared memory (228 KiB on sm90, 164 KiB on sm80,
-- 100 KiB on sm86/89, 1 KiB reserved per CTA) and registers, assuming 64 registers per
-- thread (an estimate: the register count of the compiled kernel is not known here).
-- At bf16 on an H100 that gives 6 CTAs/SM for MHA (shared memory: 36 KiB per CTA) and
-- 8 for group sizes 2..8 at D = 64 or 128 (registers), 4 at D = 256 with group 8.
--
-- Other choices: a contiguous cache is chunked like pages of one token (chunk >= 128
-- tokens); every request holds seqlen_k keys; FlashInfer groups the query heads of a KV
-- head in one CTA, so pack_gqa = true; the chunk grows if more than 256 chunks (this
-- contract's limit) would be needed.

local function ceil_div(a, b) return (a + b - 1) // b end

-- Per-SM limits by compute capability: shared memory (bytes), threads.
local function sm_limits(cc)
  if cc >= 90 then return 228 * 1024, 2048 end
  if cc == 80 or cc == 87 then return 164 * 1024, 2048 end
  return 100 * 1024, 1536  -- sm86, sm89 and others
end

local ASSUMED_REGISTERS_PER_THREAD = 64

-- CTAs per SM of BatchDecodeWithPagedKVCacheKernel for this group size, head dim, KV type.
local function decode_occupancy(group, head_dim, kv_bytes, cc)
  local vec_size = math.max(16 // kv_bytes, head_dim // 32)
  local bdx = math.max(head_dim // vec_size, 1)
  local bdy = group
  local threads = math.max(128, bdx * bdy)
  local bdz = math.max(threads // (bdx * bdy), 1)
  local tile_per_bdx = (group == 1) and ((kv_bytes == 1) and 2 or 4) or 1
  local stages = (cc >= 80) and 2 or 1
  local smem = 2 * stages * tile_per_bdx * bdy * bdz * head_dim * kv_bytes
             + math.max(tile_per_bdx * threads * 8, 2 * bdy * bdz * 4)
  local smem_per_sm, threads_per_sm = sm_limits(cc)
  local by_threads = threads_per_sm // threads
  local by_registers = 65536 // (ASSUMED_REGISTERS_PER_THREAD * threads)
  local by_smem = smem_per_sm // (smem + 1024)
  return math.max(math.min(by_threads, by_registers, by_smem, 32), 1)
end

-- FA2DetermineCtaTileQ: query rows per CTA of the tensor-core kernel.
local function cta_tile_q(packed_rows, head_dim)
  if packed_rows > 64 and head_dim < 256 then return 128 end
  if packed_rows > 16 then return 64 end
  return 16
end

local DECODE_KERNEL_GROUPS = { [1] = true, [2] = true, [3] = true, [4] = true, [8] = true }

function dispatch(s, hw)
  local qpk = s.h_q // s.h_kv
  local kv_bytes = (s.dtype == "fp8") and 1 or 2

  -- Which FlashInfer kernel runs, and how many CTAs it keeps per SM.
  local occupancy, q_tiles
  if s.seqlen_q == 1 and DECODE_KERNEL_GROUPS[qpk] then
    occupancy = decode_occupancy(qpk, s.head_dim, kv_bytes, hw.cc)
    q_tiles = 1
  else
    occupancy = 2
    local rows = s.seqlen_q * qpk
    q_tiles = ceil_div(rows, cta_tile_q(rows, s.head_dim))
  end

  -- KV in pages; a chunk is a whole number of pages and at least 128 rows' worth.
  local page = (s.page_size > 0) and s.page_size or 1
  local pages = ceil_div(s.seqlen_k, page)
  local min_chunk = math.max(128 // page, 1)

  -- Chunks per request that still fit the grid: (grid / Hkv) / (batch * q_tiles).
  local grid = occupancy * hw.num_sms
  local max_chunks = (grid // s.h_kv) // (s.batch * q_tiles)
  if max_chunks <= 1 then
    return { num_splits = 1, pack_gqa = true, sm_margin = 0 }
  end
  local chunk = math.max(ceil_div(pages, max_chunks), min_chunk, ceil_div(pages, 256))
  return { num_splits = ceil_div(pages, chunk), pack_gqa = true, sm_margin = 0 }
end
