# Writes ${OUT}: `#define GOSSAMER_GIT_SHA "<short sha>[-dirty]"`, rewritten only when the text
# changes, so a new commit rebuilds the one file that includes it and nothing else.
# Run as a build step: cmake -DSRC=<repo> -DOUT=<header> -P git_sha.cmake
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT sha)
  set(sha unknown)
else()
  execute_process(COMMAND git diff --quiet HEAD -- src WORKING_DIRECTORY ${SRC}
                  RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty)
    set(sha "${sha}-dirty")
  endif()
endif()
set(text "#pragma once\n#define GOSSAMER_GIT_SHA \"${sha}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
