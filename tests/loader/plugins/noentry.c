/* A shared library named like a plugin that exports no tdm_plugin_entry. */
__attribute__((visibility("default"))) int tandem_test_not_an_entry(void) {
  return 42;
}
