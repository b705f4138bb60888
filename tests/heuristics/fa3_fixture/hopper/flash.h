// Test fixture (evodispatch): the fields of FA3's forward params that the patch reads,
// split over a base struct as FA3 does (h and h_k live in the base).
#pragma once

struct Qkv_params {
    int h, h_k;
};

struct Flash_fwd_params : public Qkv_params {
    int b, seqlen_q, seqlen_k, d;
    int * page_table;
    int page_size;
    bool pagedkv_tma;
    bool is_bf16;
    bool is_e4m3;
    bool is_causal;
    int num_splits;
    bool pack_gqa;
    int arch;
    int num_sm;
};
