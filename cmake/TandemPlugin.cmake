# tandem_add_plugin(<name> SOURCES <files...> [LIBRARIES <targets...>] [COMPONENT <component>]
#                   [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds libtandem-<name>.so (target tandem-plugin-<name>) the way every
# Tandem plugin must be built: hidden visibility plus a version script, so
# only tdm_plugin_entry is exported; no undefined symbols left for the host
# to satisfy (plugins never link the host).
#   SOURCES           the plugin's sources
#   LIBRARIES         what it links (its vendor libraries), privately
#   OUTPUT_DIRECTORY  where the build puts the file; default
#                     TANDEM_BUILD_PLUGIN_DIR: the top of an out-of-tree
#                     build tree (`tandem --plugin-path <build dir>` finds it),
#                     lib/tandem/plugins in Tandem's own build. Give each
#                     variant of a plugin a directory of its own.
#   COMPONENT         the install component (package); default plugin-<name>
#   NO_INSTALL        build only (test doubles, examples)
# Installed under TANDEM_PLUGIN_INSTALL_DIR, where the installed host looks.
set(TANDEM_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/plugin.map")

function(tandem_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "COMPONENT;OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  set(target tandem-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(NOT ARG_OUTPUT_DIRECTORY)
    set(ARG_OUTPUT_DIRECTORY "${TANDEM_BUILD_PLUGIN_DIR}")
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME tandem-${name}
    PREFIX lib
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  # The tree's warning flags inside Tandem's own build; an out-of-tree plugin
  # keeps its project's own flags.
  target_link_libraries(${target} PRIVATE Tandem::sdk $<TARGET_NAME_IF_EXISTS:tandem_warnings> ${ARG_LIBRARIES})
  target_link_options(${target} PRIVATE
    "-Wl,--version-script=${TANDEM_PLUGIN_VERSION_SCRIPT}" "-Wl,--no-undefined")
  if(NOT ARG_NO_INSTALL)
    if(NOT ARG_COMPONENT)
      set(ARG_COMPONENT plugin-${name})
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION "${TANDEM_PLUGIN_INSTALL_DIR}" COMPONENT ${ARG_COMPONENT})
  endif()
endfunction()
