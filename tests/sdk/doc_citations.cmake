# Fails when DOC cites a file of the repository that the SDK does not
# install: a plugin author reading the installed document has only the SDK.
file(READ "${DOC}" text)
string(REGEX MATCHALL "`(host|tests|plugins|scripts|bench|packaging|cmake)/[^`]*`" cited "${text}")
if(cited)
  message(FATAL_ERROR "${DOC} cites files a plugin author does not have: ${cited}")
endif()
