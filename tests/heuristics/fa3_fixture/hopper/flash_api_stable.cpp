// Test fixture (evodispatch): shaped like FA3's hopper/flash_api_stable.cpp (includes after
// a declaration, the functions in the same order), with bodies of our own.
#include <algorithm>

#include "flash.h"

extern "C" int fixture_stable_marker(int);

#include <cstdint>
#include <string>

namespace {
inline int fixture_helper(int x) { return x > 0 ? x : 1; }
}

inline bool get_pack_gqa(Flash_fwd_params const& params) {
    if (params.arch < 90 || (params.page_table && !params.pagedkv_tma) || params.num_splits > 1) { return true; }
    return params.h != params.h_k;
}

inline int get_num_splits(Flash_fwd_params const& params) {
    #ifdef FLASHATTENTION_DISABLE_SPLIT
    return 1;
    #else
    return fixture_helper(params.num_sm / std::max(1, params.b * params.h_k));
    #endif
}
