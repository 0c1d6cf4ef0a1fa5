# Warning flags shared by every target (di_target_warnings).
add_library(di_warnings INTERFACE)
target_compile_options(di_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${DI_WERROR}>>:-Werror>)
# GCC 12 reports -Wrestrict/-Wstringop-overflow false positives inside libstdc++'s std::string at
# -O3 (GCC PR105329/PR105651); they are not about our code and would break -Werror builds.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(di_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict -Wno-stringop-overflow -Wno-stringop-overread>)
endif()

# OpenMP parallelises the CPU reference over output rows only, so results stay
# independent of the thread count and of the batch composition.
find_package(OpenMP REQUIRED COMPONENTS CXX)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "" FORCE)
endif()

if(DI_SANITIZE)
  add_compile_options(-fsanitize=${DI_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${DI_SANITIZE})
endif()

# di_library(name SOURCES... DEPS...): one static library per src/ folder.
function(di_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE di_warnings ${ARG_PRIVATE_DEPS})
endfunction()

# di_test(name SOURCES... DEPS... [LABELS ...]): a gtest binary registered with ctest.
function(di_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main di_warnings)
  target_compile_definitions(${name} PRIVATE
    DI_SOURCE_DIR="${PROJECT_SOURCE_DIR}" DI_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT ARG_LABELS)
    set(ARG_LABELS cpu)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
