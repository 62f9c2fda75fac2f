/* The dependency of testmissingdep; the plugin is linked to it without an
 * RPATH, so at run time the dynamic loader cannot find it. */
__attribute__((visibility("default"))) int tandem_test_missing_dep_value(void) {
  return 7;
}
