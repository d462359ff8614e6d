int ascend_moe_fake_cann_empty_library = 0;
