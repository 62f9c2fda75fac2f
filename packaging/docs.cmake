# The documentation every package carries (included by CMakeLists.txt, after
# it has named the packages):
#
#   /usr/share/doc/<package>/copyright            machine-readable (DEP-5):
#       copyright/common.in, plus copyright/tandem for `tandem` and the file a
#       plugin names in TANDEM_PLUGIN_<NAME>_COPYRIGHT for its package
#   /usr/share/doc/<package>/changelog.Debian.gz  from `changelog`, which is
#       also the rpm's %changelog and fixes the package revision
#   /usr/share/doc/tandem-dev/changelog.gz        sdk/CHANGELOG.md, the
#       upstream changelog of the SDK, by the name Debian gives one
#   /usr/share/man/man1/tandem.1.gz               (tandem) and
#   /usr/share/man/man1/tandem-conformance.1.gz   (dev): generated from the
#       built programs' --help at build time, so they cannot drift from it
#
# Outputs: TANDEM_PACKAGE_REVISION, TANDEM_RPM_CHANGELOG.

set(tandem_packaging_out "${PROJECT_BINARY_DIR}/packaging")
find_program(TANDEM_GZIP gzip REQUIRED)

# ---- changelog ---------------------------------------------------------------
# Its newest entry names the version the packages get: <project version>-<revision>.
set(tandem_changelog "${CMAKE_CURRENT_SOURCE_DIR}/changelog")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${tandem_changelog}")
file(READ "${tandem_changelog}" tandem_changelog_text)
if(NOT tandem_changelog_text MATCHES "^tandem \\(([^)-]+)-([^)]+)\\)")
  message(FATAL_ERROR "packaging/changelog: the first line must read 'tandem (<version>-<revision>) ...'")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "packaging/changelog: the newest entry is for version ${CMAKE_MATCH_1}, the project is "
                      "${PROJECT_VERSION}: add an entry 'tandem (${PROJECT_VERSION}-1)' at its top")
endif()
set(TANDEM_PACKAGE_REVISION "${CMAKE_MATCH_2}")
# The date of that entry dates the manual pages (not the build: the same
# source gives the same packages).
if(NOT tandem_changelog_text MATCHES "\n -- [^\n]*>  [A-Z][a-z][a-z], ([0-9]+) ([A-Z][a-z][a-z]) ([0-9]+) ")
  message(FATAL_ERROR "packaging/changelog: the newest entry has no ' -- Name <mail>  Day, DD Mon YYYY ...' line")
endif()
set(day "${CMAKE_MATCH_1}")
set(month "${CMAKE_MATCH_2}")
set(year "${CMAKE_MATCH_3}")
set(tandem_months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
list(FIND tandem_months "${month}" month)
math(EXPR month "${month} + 1" OUTPUT_FORMAT DECIMAL)
string(REGEX REPLACE "^([0-9])$" "0\\1" month "${month}")
string(REGEX REPLACE "^([0-9])$" "0\\1" day "${day}")
set(tandem_release_date "${year}-${month}-${day}")

set(tandem_changelog_deb "${tandem_packaging_out}/changelog.Debian.gz")
set(TANDEM_RPM_CHANGELOG "${tandem_packaging_out}/changelog.rpm")
add_custom_command(
  OUTPUT "${tandem_changelog_deb}" "${TANDEM_RPM_CHANGELOG}"
  COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/changelog.sh" "${tandem_changelog}" "${tandem_packaging_out}"
  DEPENDS "${tandem_changelog}" "${CMAKE_CURRENT_SOURCE_DIR}/changelog.sh"
  COMMENT "Package changelogs from packaging/changelog"
  VERBATIM)
add_custom_target(tandem_package_changelog ALL DEPENDS "${tandem_changelog_deb}" "${TANDEM_RPM_CHANGELOG}")

# ---- copyright and changelog of every package --------------------------------
configure_file(copyright/common.in "${tandem_packaging_out}/copyright-common" @ONLY)
file(READ "${tandem_packaging_out}/copyright-common" tandem_copyright_common)
foreach(component IN ITEMS runtime dev LISTS tandem_plugin_components)
  set(package "${TANDEM_PACKAGE_NAME_${component}}")
  set(extra "")
  if(component STREQUAL "runtime")
    set(extra "${CMAKE_CURRENT_SOURCE_DIR}/copyright/tandem")
  elseif(component MATCHES "^plugin-(.+)$")
    tandem_plugin_package_setting(extra "${CMAKE_MATCH_1}" COPYRIGHT)
  endif()
  set(text "${tandem_copyright_common}")
  if(extra)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${extra}")
    file(READ "${extra}" more)
    string(APPEND text "${more}")
  endif()
  # file(CONFIGURE) rewrites the file only when the text changed.
  file(CONFIGURE OUTPUT "${tandem_packaging_out}/doc/${package}/copyright" CONTENT "${text}" @ONLY)
  install(FILES "${tandem_packaging_out}/doc/${package}/copyright" "${tandem_changelog_deb}"
          DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}" COMPONENT ${component})
endforeach()

# The SDK's changelog (Markdown, read as text) in the dev package.
set(tandem_sdk_changelog "${tandem_packaging_out}/doc/tandem-dev/changelog.gz")
add_custom_command(
  OUTPUT "${tandem_sdk_changelog}"
  COMMAND sh -c "\"$0\" -9n -c \"$1\" > \"$2\"" "${TANDEM_GZIP}" "${PROJECT_SOURCE_DIR}/sdk/CHANGELOG.md"
          "${tandem_sdk_changelog}"
  DEPENDS "${PROJECT_SOURCE_DIR}/sdk/CHANGELOG.md"
  COMMENT "changelog.gz of tandem-dev from sdk/CHANGELOG.md"
  VERBATIM)
add_custom_target(tandem_sdk_changelog ALL DEPENDS "${tandem_sdk_changelog}")
install(FILES "${tandem_sdk_changelog}" DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/tandem-dev" COMPONENT dev)

# ---- manual pages --------------------------------------------------------------
# The build runs the programs it built (their --help), so it cannot be a
# cross-compile.
# tandem_man_page(<target> <component> <whatis> [args of help2man.sh...])
function(tandem_man_page target component whatis)
  set(page "${tandem_packaging_out}/man/${target}.1")
  add_custom_command(
    OUTPUT "${page}.gz"
    COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/man/help2man.sh" --program "$<TARGET_FILE:${target}>"
            --name "${target}" --whatis "${whatis}" --version "Tandem ${PROJECT_VERSION}"
            --date "${tandem_release_date}" --output "${page}" ${ARGN}
    COMMAND "${TANDEM_GZIP}" -9nf "${page}"
    DEPENDS ${target} "${CMAKE_CURRENT_SOURCE_DIR}/man/help2man.sh" "${CMAKE_CURRENT_SOURCE_DIR}/man/help2man.awk"
    COMMENT "Manual page ${target}.1 from ${target} --help"
    VERBATIM)
  add_custom_target(tandem_man_${target} ALL DEPENDS "${page}.gz")
  install(FILES "${page}.gz" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1" COMPONENT ${component})
endfunction()
tandem_man_page(tandem runtime "train neural networks on GPU and CPU together"
                --commands --see-also "tandem-conformance(1)")
tandem_man_page(tandem-conformance dev "check a Tandem backend plugin against the reference backend"
                --see-also "tandem(1)")
