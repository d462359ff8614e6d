// A library with an unresolved function, for the loader's test: RTLD_NOW refuses to open it,
// RTLD_LAZY (op-plugin's mode) serves its other symbols, as an operator library whose unused
// entry points need a library this process lacks.
extern "C" int FakeAclUndefinedForLazyTest();
extern "C" int aclnnLazyProbe() { return FakeAclUndefinedForLazyTest(); }
