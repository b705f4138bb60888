// Test fixture (evodispatch): shaped like FA3's hopper/flash_api.cpp, with bodies of our
// own. The patch must put its include after "flash.h" and outside the #ifdef below, skip
// the declaration, and count braces past the ones in comments and strings.
#include <algorithm>
#include <cstdint>

#include "flash.h"
#ifdef EVO_FIXTURE_EXTRA
#include <vector>
#endif

inline int get_num_splits(Flash_fwd_params const& params);

inline bool get_pack_gqa(Flash_fwd_params const& params) {
    // Packed when splitting or paged without TMA { as the kernels need }
    if (params.arch < 90 || (params.page_table && !params.pagedkv_tma) || params.num_splits > 1) { return true; }
    if (params.h == params.h_k) { return false; }
    return params.seqlen_q * (params.h / params.h_k) <= 128;
}

inline int get_num_splits(Flash_fwd_params const& params) {
    #ifdef FLASHATTENTION_DISABLE_SPLIT
    return 1;
    #else
    char const* brace = "}{";
    char const close = '}';
    (void)brace; (void)close;
    int const tiles = (params.seqlen_k + 127) / 128;
    if (params.b * params.h_k >= params.num_sm) { return 1; }
    return std::max(1, std::min(tiles, params.num_sm / (params.b * params.h_k)));
    #endif
}

inline int fixture_after() { return 7; }
